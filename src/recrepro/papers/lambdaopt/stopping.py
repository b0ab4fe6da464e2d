"""λOpt's converging budget: train until the validation AUC stops improving, keep the best epoch.

The official code (``yihong-chen/lambda-opt@fdaa44d``, ``engine.py``) trains for ``max_steps = 1e8``
steps and evaluates the test set every ``eval_interval`` epochs (1 in the Amazon scripts) without
selecting anything; its slides draw the λ-trajectory to epoch 3,200.  We train every variant and
baseline until the validation AUC has not improved for ``patience`` epochs, at most ``epochs``
(the cap), and report the test metrics of the best validation epoch (docs/deviations.md#lambdaopt-protocol).

:class:`ValidationMonitor` is the stopping rule the models' ``fit(monitor=...)`` calls after every
epoch (:meth:`recrepro.models.mf_bpr.MFBPR.fit`, :meth:`recrepro.models.neumf.NeuMF.fit`).  Epochs in
its table and fields count from 1 (``best_epoch = 3``: the state after three epochs).

Rule (hand-checked in tests/test_lambdaopt_stopping.py): after epoch ``e`` (a multiple of
``eval_every``, or the cap) the validation AUC ``v_e`` is measured; it becomes the best when
``v_e > v_best`` (strictly; the first value is the best so far).  The run stops on patience after
epoch ``e`` when ``e − best_epoch ≥ patience``, and at the cap otherwise.  A model with an
``on_plateau(epoch) -> bool`` hook may answer a plateau by starting a new phase instead of stopping
(AMF: the plateau of its BPR pre-training starts the adversarial phase); a model's
``training_phase`` (0, 1, …) tells the monitor which phase an epoch belonged to.  When it changes,
the best is forgotten and the rule starts over from that epoch, so the selection is over the last
phase only.

``wait_for_gain``: patience does not end a run that has not yet improved on its first evaluation
(in its first phase); it trains on until it does (the patience then counts from that new best) or
to the cap.  Why: under the official N(0, 1) initialisation λOpt's MF variants on amazon-video dip
below their first validation AUC and climb back only after 80–100 epochs (-DUI passed its first
value at epoch 79; -DU was still below it, and rising, when a patience of 100 from epoch 5 ended
it at epoch 105: docs/deviations.md#lambdaopt-video-init).  A first evaluation is where the model
started, not a peak it reached, so it should not start the patience clock.  The same floor exists
as PyTorch Lightning's ``min_epochs``; this one is not a fixed count, so a run that learns from
its first epochs (every ml-100k run) stops exactly as without it.

``gain_margin``: how much an evaluation must beat the first one by to count as a gain (strictly more
than the margin; 0: any gain).  Why: on a plateau at its initialisation the validation AUC wanders
by a few thousandths (amazon-video's MF-λOpt-D: 0.5115 first, 0.5131 best after 1,055 epochs;
ml-100k's λFix at λ = 10: 0.5004 first, 0.5084 best, both at chance on test), so without a margin
the first such wobble starts the patience clock and the run ends on the plateau it never left
(amazon-video's ``lambdaopt_dui_code``, seed 0: a gain of 1e-4 at its second evaluation ended it
after epoch 110 at chance).  The paper tier uses 0.01: about twice the standard error of a
chance-level validation AUC over amazon-video's ~3,600 held-out users (√(1/12/3,600) ≈ 0.005).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ValidationMonitor"]


class ValidationMonitor:
    """Patience-and-cap stopping on a validation score, with the best epoch's model kept.

    Parameters
    ----------
    evaluate:
        ``model -> float``, the validation score (larger is better; λOpt: validation AUC).
    patience:
        Epochs without a strict improvement after which the run stops (``None``: never, the run
        goes to the cap).
    cap:
        The most epochs (the model's ``epochs``); the last one is always evaluated.
    eval_every:
        Evaluate after every ``eval_every``-th epoch (1: every epoch, the official cadence).
    wait_for_gain:
        Do not stop on patience before an evaluation has beaten the first one (first phase only).
    gain_margin:
        With ``wait_for_gain``: the amount by which an evaluation must beat the first one (strictly
        more than it) to count as a gain.

    Attributes
    ----------
    curve:
        ``[{"epoch", "val_auc", "phase"}]`` of every evaluation (epochs from 1).
    best_epoch, best_value, best_snapshot:
        The best evaluation of the current phase and the model's ``snapshot()`` there.
    stopped:
        ``None`` while training, ``"patience"`` or ``"cap"`` once the run has ended.
    """

    def __init__(self, evaluate: Callable[[Any], float], *, patience: int | None, cap: int,
                 eval_every: int = 1, wait_for_gain: bool = False, gain_margin: float = 0.0) -> None:
        if patience is not None and int(patience) < 1:
            raise ValueError(f"patience must be >= 1 epoch or None, got {patience}")
        if int(eval_every) < 1:
            raise ValueError(f"eval_every must be >= 1, got {eval_every}")
        if not float(gain_margin) >= 0.0:
            raise ValueError(f"gain_margin must be >= 0, got {gain_margin}")
        self.evaluate = evaluate
        self.patience = None if patience is None else int(patience)
        self.cap = int(cap)
        self.eval_every = int(eval_every)
        self.wait_for_gain = bool(wait_for_gain)
        self.gain_margin = float(gain_margin)
        self.curve: list[dict[str, Any]] = []
        self.best_epoch: int | None = None
        self.best_value: float | None = None
        self.best_snapshot: Any = None
        self.phase = 0
        self.phase_start = 0
        self.stopped: str | None = None
        self.epochs_done = 0

    def settings(self) -> dict[str, Any]:
        """What defines the rule (part of a checkpoint's key)."""
        out = {"patience": self.patience, "cap": self.cap, "eval_every": self.eval_every}
        if self.wait_for_gain:          # absent when off: the keys of runs made before it existed stay valid
            out["wait_for_gain"] = True
        if self.gain_margin > 0:        # likewise absent at 0
            out["gain_margin"] = self.gain_margin
        return out

    def gained(self) -> bool:
        """Whether the run has beaten its first evaluation by more than ``gain_margin`` (always, after
        its first phase)."""
        if self.phase > 0:
            return True
        if not self.curve or self.best_epoch is None or self.best_epoch <= self.curve[0]["epoch"]:
            return False
        return self.best_value - self.curve[0]["val_auc"] > self.gain_margin

    def update(self, model: Any, epoch: int) -> bool:
        """After 0-based ``epoch``: evaluate when due, keep the best, say whether to stop."""
        done = self.epochs_done = epoch + 1
        phase = int(getattr(model, "training_phase", 0))
        if phase != self.phase:             # a new phase started with this epoch
            self.phase, self.phase_start = phase, epoch
            self.best_epoch = self.best_value = self.best_snapshot = None
        if done % self.eval_every == 0 or done >= self.cap:
            value = float(self.evaluate(model))
            self.curve.append({"epoch": done, "val_auc": value, "phase": self.phase})
            if self.best_value is None or value > self.best_value:
                self.best_epoch, self.best_value = done, value
                self.best_snapshot = model.snapshot()
            print(f"epoch {done}: validation auc {value:.4f} (best {self.best_value:.4f} after epoch "
                  f"{self.best_epoch})", flush=True)
        if done >= self.cap:
            self.stopped = "cap"
            return True
        since = done - (self.best_epoch if self.best_epoch is not None else self.phase_start)
        if self.patience is not None and since >= self.patience:
            if self.wait_for_gain and not self.gained():
                return False                # still at (or below) where it started: train on
            plateau = getattr(model, "on_plateau", None)
            if plateau is not None and plateau(epoch):
                return False                # the model starts its next phase with the next epoch
            self.stopped = "patience"
            return True
        return False

    def summary(self) -> dict[str, Any]:
        """The record's ``stopping`` section (epochs from 1)."""
        return {"rule": "validation AUC, patience and cap", "patience": self.patience, "cap": self.cap,
                "eval_every": self.eval_every, "wait_for_gain": self.wait_for_gain, "gain_margin": self.gain_margin,
                "stopped": self.stopped,
                "epochs_trained": self.epochs_done,
                "best_epoch": self.best_epoch, "best_val_auc": self.best_value,
                "first_val_auc": self.curve[0]["val_auc"] if self.curve else None,
                "phases": self.phase + 1, "last_phase_start": self.phase_start}

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps (the best snapshot included)."""
        return {"curve": list(self.curve), "best_epoch": self.best_epoch, "best_value": self.best_value,
                "best_snapshot": self.best_snapshot, "phase": self.phase, "phase_start": self.phase_start,
                "stopped": self.stopped, "epochs_done": self.epochs_done}

    def load_state(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state`."""
        self.curve = [dict(row) for row in state["curve"]]
        self.best_epoch, self.best_value = state["best_epoch"], state["best_value"]
        self.best_snapshot = state["best_snapshot"]
        self.phase, self.phase_start = int(state["phase"]), int(state["phase_start"])
        self.stopped = state["stopped"]
        self.epochs_done = int(state["epochs_done"])
