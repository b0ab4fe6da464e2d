"""FairRec post-processing (official fairrec.hpp semantics) and the exADMM driver's operating points."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from recrepro.papers.exadmm.fairrec import fairrec_rankings
from recrepro.papers.exadmm.rules import operating_points


def test_fairrec_round_robin_hand_example():
    # 2 users, 4 items, k = 2, prop = 1: stock = ceil((2*2 // 4) * 1) = 1 for every item.
    scores = np.array([[4.0, 3.0, 2.0, 1.0],
                       [4.0, 3.5, 1.0, 2.0]])
    history = sp.csr_matrix((2, 4))
    lists = fairrec_rankings(scores, history, k=2, prop=1.0, seed=0)
    first = np.random.default_rng(0).permutation(2)[0]
    other = 1 - first
    # round 1: `first` takes item 0; `other` finds item 0 out of stock and takes item 1.
    # round 2: `first` takes its best remaining with stock (item 2 for user 0, item 3 for user 1),
    # then `other` takes its best with stock left.
    assert lists[first, 0] == 0 and lists[other, 0] == 1
    assert sorted(lists.ravel().tolist()) == [0, 1, 2, 3]  # every item exposed exactly once


def test_fairrec_stock_excludes_interacted_users_and_fills_by_score():
    # 3 users, 3 items, k = 1, prop = 1: ceil(3*1 // 3) = 1; item 0 was seen by every user -> stock 0
    scores = np.array([[9.0, 2.0, 1.0], [9.0, 1.0, 2.0], [9.0, 2.0, 1.0]])
    history = sp.csr_matrix(np.array([[0, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=float))
    lists = fairrec_rankings(scores, history, k=1, prop=1.0, seed=1)
    assert sorted(lists.ravel().tolist()) == [0, 1, 2]  # one user each
    # with a seen item masked, the user never gets it
    history = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 0], [0, 0, 0]], dtype=float))
    lists = fairrec_rankings(scores, history, k=2, prop=0.0, seed=1)  # prop 0: no stock, phase 2 only
    assert lists[0].tolist() == [1, 2]
    assert lists[1].tolist() == [0, 2] and lists[2].tolist() == [0, 1]


def test_operating_points_names_and_overrides():
    entry = {"ials": {"dim": 4, "l2": 0.1}, "exadmm": {"dim": 4, "exposure_reg": 1e-3},
             "sweep": {"ials": [{"l2": 0.2}], "exadmm": [{"exposure_reg": 0.0}, {"name": "exadmm_code",
                                                                                   "u_step_hessian": "lower"}],
                       "fairrec": [{"min_assignment_prop": 0.5}]}}
    points = operating_points(entry, {"strength_scaling": "n2", "u_step_hessian": "full"})
    assert list(points) == ["ials", "ials_sw1", "exadmm", "exadmm_sw1", "exadmm_code", "fairrec_sw1"]
    assert points["ials_sw1"]["params"] == {"dim": 4, "l2": 0.2}
    assert points["exadmm"]["params"]["u_step_hessian"] == "full"
    assert points["exadmm_code"]["params"]["u_step_hessian"] == "lower"
    assert points["exadmm_sw1"]["params"]["exposure_reg"] == 0.0
    assert points["fairrec_sw1"]["params"]["base"] == {"dim": 4, "l2": 0.1}
    assert all(p["record_part"] == "test" for p in points.values())


def test_scalability_record_holds_timings_and_a_portable_provenance(tmp_path):
    """Fig. 2's record: one row per family and point, and the provenance a run record has."""
    from conftest import build_synthetic_split

    from recrepro.datasets.synthetic import SyntheticSpec
    from recrepro.io import read_json
    from recrepro.papers.exadmm.run import scalability

    split = build_synthetic_split(tmp_path / "splits", SyntheticSpec(seed=3, users=60, items=40, min_user_interactions=5),
                                  "exadmm", 2, "random_ratio", 0)
    entry = {"ials": {"dim": 4, "l2": 0.1}, "exadmm": {"dim": 4, "exposure_reg": 1e-3},
             "sweep": {"fairrec": [{"topk_fair": 3, "min_assignment_prop": 0.5}]}}
    scalability(split, tmp_path / "r.json", entry=entry, dims=[2, 4], user_fractions=[0.5], epochs=1)
    record = read_json(tmp_path / "r.json")
    points = sorted((r["family"], r["axis"], r["dim"]) for r in record["records"])
    assert points == sorted([(f, "dim", d) for f in ("ials", "fairrec", "exadmm") for d in (2, 4)]
                            + [(f, "users", 4) for f in ("ials", "fairrec", "exadmm")])
    assert record["fairrec_k"] == 3 and record["epochs"] == 1
    prov = record["provenance"]
    assert prov["config"]["dims"] == [2, 4] and prov["config"]["entry"] == entry
    assert prov["split"]["verified"] and prov["split"]["manifest"].endswith("manifest.json")
    assert str(tmp_path) not in prov["split"]["manifest"]
    assert prov["seed"] == 0 and prov["device"] == "cpu" and prov["wall_seconds"] >= 0
