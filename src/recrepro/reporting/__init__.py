"""The pages recrepro writes from records: the house plotting style, the tier's front page
(``results/<tier>/README.md``), the HTML report, the compute page (``docs/compute.md``) and the claims'
forest plots."""
