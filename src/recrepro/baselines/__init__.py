"""Simple baselines: MostPop and Random on any split (:mod:`.run`), the tuned strong simple baselines
on each paper's own split (:mod:`.strong`, grid search in :mod:`.grid`) and their figure
(:mod:`.figure`)."""
