"""Run the released FedRAP code (mtics/FedRAP) on our ML-100K leave-one-out split, round by round.

Issue 46: does our code mode (``fedrap_code_pool``: the released code's objective *and* its negative
pool) track the released code over 100 rounds?  Nothing of the released code is kept in this
repository: give the path of a checkout *outside* it, e.g.::

    git --git-dir=<mirror of mtics/FedRAP> archive HEAD | tar -x -C /tmp/official_fedrap

The released code is Python; this harness writes a small driver into a temporary folder that imports
the checkout's ``SampleGenerator`` and ``FedRAPEngine`` (on CPU: ``use_cuda`` off) and runs
``train.py``'s round loop on **our** split: the training, validation and test parts of
``--split-dir`` are handed to its loader with timestamps that make its time-ordered leave-one-out
pick exactly our validation and test items, and its 99 evaluation negatives per user are replaced by
ours (``negatives.parquet``); everything else (its negative pool — all of a user's items, held-out
included —, its initialisation, optimiser, schedule, random draws) is the released code's own.  After
every round it appends the test and validation HR@10 / NDCG@10 to a JSON-lines file and saves its whole
state (the engine with every client's parameters, the server's item table, the loader, every random
state) to a git-ignored checkpoint, so a killed run resumes where it stopped, as if unbroken.

``--flags readme`` is the README's ML-100K command (λ 0.1, μ 1e-3, lr_network 1e-4, lr_args 1000, l2
1e-6); ``--flags ml1m`` the maintainer's ML-1M log header in mtics/FedRAP issue #1 (λ = μ = 0.01,
lr_network 0.5, lr_args 1000, l2 1e-4).  ``--compare <our run folder>`` then reads our record's
``history.parquet`` and reports the largest per-round |Δ test HR@10| and both curves' peaks.
``--evaluator-check ROUND ...`` instead retrains our ``--compare`` run to those rounds and ranks its
scores with our evaluator and with the checkout's own (``evaluator_check``): a gap between the two
curves that both evaluators give alike lies in the trained models, not in the scoring.

Without the checkout, torch/pandas, or the split, it prints why it skips and exits 0.  The released
code takes about 50 s a round on ML-100K on one CPU core with its batches gathered at once (below; a
background job: 100 rounds ≈ 80 min).

    python benchmarks/official_fedrap.py --checkout /tmp/official_fedrap \\
        --split-dir data/splits/ml-100k/fedrap/leave_one_out/seed0 --flags readme --rounds 100 \\
        --out results/paper/fedrap/official/ml-100k_readme_seed0.jsonl \\
        --compare results/paper/fedrap/runs/ml-100k/leave_one_out/fedrap_code_pool/seed0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

#: the released train.py's defaults (argparse), then each flag set's overrides
DEFAULTS = {"alias": "FedRAP", "clients_sample_ratio": 1.0, "top_k": 10, "decay_rate": 0.97, "num_round": 100,
            "local_epoch": 10, "tol": 1e-4, "batch_size": 2048, "lr_network": 0.5, "lr_args": 200.0, "latent_dim": 32,
            "l2_regularization": 1e-4, "num_negative": 4, "lambda": 0.1, "mu": 0.1, "regular": "l1",
            "device_id": 0, "use_cuda": False, "seed": 0, "vary_param": "tanh"}
FLAG_SETS = {
    "readme": {"mu": 1e-3, "l2_regularization": 1e-6, "lr_network": 1e-4, "lr_args": 1000.0},
    "ml1m": {"lambda": 0.01, "mu": 0.01, "lr_network": 0.5, "lr_args": 1000.0, "l2_regularization": 1e-4},
}

# Batches gathered with one indexing per batch instead of one Python call per sample and a stack:
# the same samples in the same order (the loader's sampler and its random draws are untouched), so the
# same tensors bit for bit (tests/test_official_fedrap_harness.py); the per-sample path took two thirds
# of a round on ML-100K (about 180 s a round instead of 50 s on one CPU core).  The driver installs it on
# the released dataset class and on the loader its engine builds; nothing else of the code changes.
BATCHED_FETCH = r'''
def batch_items(self, index):
    return self.user_tensor[index], self.item_tensor[index], self.target_tensor[index]


def batched_loader(dataset, **kwargs):
    return torch.utils.data.DataLoader(dataset, collate_fn=list, **kwargs)
'''

# The driver runs inside the checkout (its packages ``model`` and ``utils`` on sys.path); it is ours,
# written from the round loop's description above, not a copy of train.py.
DRIVER = r'''
import json, random, sys
import numpy as np, pandas as pd, torch
spec = json.loads(sys.argv[1])
config = dict(spec["config"])
random.seed(config["seed"]); np.random.seed(config["seed"]); torch.manual_seed(config["seed"])
import utils.data as data
import model.engine as engine_module
from model.model import FedRAPEngine
''' + BATCHED_FETCH + r'''
data.UserItemRatingDataset.__getitems__ = batch_items
engine_module.DataLoader = batched_loader

parts = {p: pd.read_parquet(f"{spec['split_dir']}/{p}.parquet") for p in ("train", "validation", "test", "negatives")}
# timestamps that make the loader's time-ordered leave-one-out pick our validation and test items
frames = [parts["train"].assign(timestamp=0), parts["validation"].assign(timestamp=1), parts["test"].assign(timestamp=2)]
ratings = pd.concat(frames)[["user", "item", "timestamp"]].rename(columns={"user": "userId", "item": "itemId"})
ratings["rating"] = 1.0
ratings = ratings.sort_values(["userId", "timestamp"], kind="stable").reset_index(drop=True)  # its loader's order
config["num_users"] = int(ratings["userId"].max()) + 1
config["num_items"] = int(max(ratings["itemId"].max(), parts["negatives"]["item"].max())) + 1
ours = parts["negatives"].groupby("user")["item"].apply(list)

def sample_negative(self, r):
    # the released pool (every item a user never interacted with), our 99 evaluation negatives
    status = r.groupby("userId")["itemId"].apply(set).reset_index().rename(columns={"itemId": "interacted_items"})
    # a sorted list, not the set the released code keeps: random.sample refuses sets since Python 3.11
    # (the code was written for 3.8, whose sample took the set in its iteration order)
    status["negative_items"] = status["interacted_items"].apply(lambda x: sorted(self.item_pool - x))
    status["negative_samples"] = [list(ours[u]) for u in status["userId"]]
    return status[["userId", "negative_items", "negative_samples"]]

data.SampleGenerator._sample_negative = sample_negative
engine = FedRAPEngine(config)
generator = data.SampleGenerator(ratings=ratings)
validate, test = generator.validate_data, generator.test_data
commonality = torch.nn.Embedding(num_embeddings=config["num_items"], embedding_dim=config["latent_dim"])
import os
ckpt = spec["checkpoint"]
if spec["start_round"]:
    # resume: the engine (every client's parameters), the server's item table, the loader and every
    # random state as they were after round start_round, so the rounds after are those of an unbroken run
    state = torch.load(ckpt, weights_only=False)
    assert state["round"] == spec["start_round"], (state["round"], spec["start_round"])
    engine, commonality, generator = state["engine"], state["commonality"], state["generator"]
    validate, test = generator.validate_data, generator.test_data
    random.setstate(state["random"]); np.random.set_state(state["numpy"]); torch.set_rng_state(state["torch"])
with open(spec["out"], "a") as out:
    for a in range(spec["start_round"], config["num_round"]):
        train = generator.store_all_train_data(config["num_negative"])
        losses, sparsity = engine.federatedTrainOneRound(train, commonality, a)
        hr, ndcg = engine.federatedEvaluate(test)
        val_hr, val_ndcg = engine.federatedEvaluate(validate)
        out.write(json.dumps({"round": a + 1, "test_hr@10": hr, "test_ndcg@10": ndcg, "val_hr@10": val_hr,
                              "val_ndcg@10": val_ndcg, "train_loss": sum(losses.values()) / len(losses),
                              "sparsity": float(sparsity)}) + "\n")
        out.flush()
        torch.save({"round": a + 1, "engine": engine, "commonality": commonality, "generator": generator,
                    "random": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
                   ckpt + ".tmp")
        os.replace(ckpt + ".tmp", ckpt)
        with open(ckpt + ".json.tmp", "w") as side:
            # the flags as given: the engine decays the learning rates in the dict it was handed
            json.dump({"round": a + 1, "config": spec["config"], "split_dir": spec["split_dir"]}, side)
        os.replace(ckpt + ".json.tmp", ckpt + ".json")
'''


def skip(reason: str) -> int:
    print(f"official_fedrap: skipped: {reason}")
    return 0


def read_rounds(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare(official: list[dict], ours_dir: Path) -> dict:
    """Largest per-round |Δ test HR@10| between the released code and our record, and both peaks."""
    import pandas as pd

    ours = pd.read_parquet(ours_dir / "history.parquet").set_index("round")
    rounds = [r for r in official if r["round"] in ours.index]
    deltas = [abs(r["test_hr@10"] - float(ours.loc[r["round"], "test_hr@10"])) for r in rounds]
    if not rounds:
        return {"rounds_compared": 0}
    peak_official = max(official, key=lambda r: r["test_hr@10"])
    return {"rounds_compared": len(rounds), "max_abs_delta_test_hr@10": max(deltas),
            "round_of_max_delta": rounds[deltas.index(max(deltas))]["round"],
            "mean_abs_delta_test_hr@10": sum(deltas) / len(deltas),
            "official_peak_test_hr@10": peak_official["test_hr@10"], "official_peak_round": peak_official["round"],
            "ours_peak_test_hr@10": float(ours["test_hr@10"].max()), "ours_peak_round": int(ours["test_hr@10"].idxmax()),
            "official_last": rounds[-1]["test_hr@10"], "ours_last": float(ours.loc[rounds[-1]["round"], "test_hr@10"])}


def evaluator_check(checkout: Path, split_dir: Path, our_run: Path, rounds: list[int]) -> list[dict]:
    """Our evaluator and the released one on the **same** scores: retrain our run (its ``provenance.json``
    settings, its record's seed and negative pool) to each of ``rounds`` and score its test items and 99 negatives once; rank them
    with ``evaluate_sampled`` (pessimistic ties) and with the checkout's ``utils/metrics.py`` ``MetronAtK``,
    imported as it is.  Equal values mean a gap between the released code's curve and ours is in the two
    trained models, not in how they are scored."""
    import numpy as np

    sys.path.insert(0, str(checkout.resolve()))
    from utils.metrics import MetronAtK  # the released evaluator, from the checkout outside the repository

    from recrepro.papers.fedrap.run import NEGATIVE_POOL_PARTS, _eval_both
    from recrepro.papers.fedrap.variants import make_variant
    from recrepro.evaluation.on_split import SplitData

    provenance = json.loads((our_run / "provenance.json").read_text())
    record = json.loads((our_run / "metrics.json").read_text())
    settings = dict(provenance["config"]["settings"])
    settings.pop("negative_pool", None)
    pool = record["negative_pool"]  # the record states its pool (the variant's, not among the settings)
    split = SplitData(split_dir)
    test, neg = split.part("test"), split.part("negatives")
    model = make_variant(settings, seed=int(record["seed"]))
    out: list[dict] = []

    def score(m, a):
        if a not in rounds:
            return {}
        ours = _eval_both(m, split, "pessimistic")[1]  # the test side, exactly as a run record scores it
        ts = m.score_pairs(test["user"].to_numpy(), test["item"].to_numpy())
        ns = m.score_pairs(neg["user"].to_numpy(), neg["item"].to_numpy())
        released = MetronAtK(top_k=10)  # pairs each user's scores by user id, in any row order
        released.subjects = [test["user"].tolist(), test["item"].tolist(), ts.tolist(),
                             neg["user"].tolist(), neg["item"].tolist(), ns.tolist()]
        by_user = np.zeros(split.n_users, np.float32)
        by_user[test["user"].to_numpy()] = ts
        tied = neg["user"].to_numpy()[ns == by_user[neg["user"].to_numpy()]]
        out.append({"round": a, "ours_hr@10": ours.overall["hr@10"], "ours_ndcg@10": ours.overall["ndcg@10"],
                    "released_hr@10": released.cal_hit_ratio(), "released_ndcg@10": released.cal_ndcg(),
                    "users_with_a_tie": int(np.unique(tied).size)})
        print(json.dumps(out[-1]), flush=True)
        return {}

    model.fit(split.csr(["train"]), split.csr(NEGATIVE_POOL_PARTS[pool]), eval_fn=score, rounds=max(rounds))
    return out


def resume_round(done: list[dict], checkpoint: Path, config: dict, split_dir: str) -> int | None:
    """The round to resume from: the checkpoint's, if it is of these flags, seed and split and the
    JSON lines hold its rounds (one more line: the round after it is run again); else ``None``."""
    side = Path(f"{checkpoint}.json")
    if not done or not side.is_file() or not checkpoint.is_file():
        return None
    state = json.loads(side.read_text())
    if state.get("config") != config or state.get("split_dir") != split_dir:
        return None
    return state["round"] if state["round"] in (len(done), len(done) - 1) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="a checkout of mtics/FedRAP outside this repository")
    parser.add_argument("--split-dir", type=Path, required=True)
    parser.add_argument("--flags", choices=sorted(FLAG_SETS), default="readme")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per round (appended; a rerun resumes "
                                                                 "from the checkpoint)")
    parser.add_argument("--checkpoint", type=Path, default=None,
                        help="the driver's state after every round, to resume a killed run from "
                             "(default: checkpoints/official_fedrap/<out name>.pt, git-ignored)")
    parser.add_argument("--compare", type=Path, default=None, help="our run folder (history.parquet) to compare with")
    parser.add_argument("--evaluator-check", type=int, nargs="+", default=None, metavar="ROUND",
                        help="instead of the released run: retrain our --compare run to these rounds and score it "
                             "with both evaluators (evaluator_check)")
    args = parser.parse_args(argv)
    if not (args.checkout / "model" / "model.py").is_file() or not (args.checkout / "utils" / "data.py").is_file():
        return skip(f"no mtics/FedRAP checkout at {args.checkout} (model/model.py, utils/data.py)")
    if not (args.split_dir / "negatives.parquet").is_file():
        return skip(f"no leave-one-out split at {args.split_dir}")
    if args.evaluator_check:
        if args.compare is None or not (args.compare / "provenance.json").is_file():
            return skip("--evaluator-check needs --compare <our run folder> with its provenance.json")
        rows = evaluator_check(args.checkout, args.split_dir, args.compare, sorted(set(args.evaluator_check)))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    checkpoint = args.checkpoint or Path("checkpoints/official_fedrap") / f"{args.out.stem}.pt"
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    done = read_rounds(args.out)
    config = {**DEFAULTS, **FLAG_SETS[args.flags], "num_round": args.rounds, "seed": args.seed}
    if len(done) < args.rounds:
        start = resume_round(done, checkpoint, config, str(args.split_dir.resolve()))
        if done and start is None:
            return skip(f"{args.out} holds {len(done)} of {args.rounds} rounds and no checkpoint of them "
                        f"({checkpoint}.json) matches; delete it to rerun from round 1")
        if start is not None and start < len(done):  # killed between a round's line and its checkpoint
            args.out.write_text("".join(json.dumps(r) + "\n" for r in done[:start]))
        spec = {"config": config, "split_dir": str(args.split_dir.resolve()), "out": str(args.out.resolve()),
                "start_round": start or 0, "checkpoint": str(checkpoint.resolve())}
        with tempfile.TemporaryDirectory() as tmp:
            driver = Path(tmp) / "driver.py"
            driver.write_text(DRIVER)
            subprocess.run([sys.executable, str(driver), json.dumps(spec)], cwd=args.checkout, check=True,
                           env={"PYTHONPATH": str(args.checkout.resolve()), "OMP_NUM_THREADS": "1",
                                "PATH": "/usr/bin:/bin"})
    result = {"flags": args.flags, "config": {**FLAG_SETS[args.flags]}, "rounds": len(read_rounds(args.out))}
    if args.compare is not None:
        result.update(compare(read_rounds(args.out), args.compare))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
