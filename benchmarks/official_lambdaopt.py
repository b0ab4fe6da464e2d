"""Run the released λOpt code (yihong-chen/lambda-opt@fdaa44d) on our λOpt split, epoch by epoch.

Our ml-100k records contradict the paper's claim that MF-λOpt-DUI beats MF-λFix (seed 0: test AUC
0.780 for ``lambdaopt_dui``, 0.794 for ``lambdafix``).  Before that is a result: does the released
code, trained on the **same** data and scored by the **same** evaluator, behave as ours does?
Nothing of the released code is kept in this repository: give the path of a checkout *outside* it::

    git --git-dir=<mirror of yihong-chen/lambda-opt> archive fdaa44d | tar -x -C /tmp/official_lambdaopt

(``fdaa44d``, not HEAD: HEAD ``672a7ec`` dropped ``set_assumed_flag(True)``, which breaks the Adam path.)

What is the released code's own
-------------------------------
The driver (written into a temporary folder, run with the checkout's ``src/`` on ``sys.path``)
builds the checkout's ``engine.Engine`` and runs its ``train_an_episode`` step loop unchanged: the
MF (``factorizer.modules.MF``: ``nn.Embedding`` tables, i.e. N(0, 1) initialisation, no biases), its
Adam (lr 1e-3, grad-norm clip 100), the BPR loss (``BCEWithLogitsLoss`` sum / B) and batch penalty,
the λ network (``regularizer``: for ``--variant dui`` the ``dimension+user+item`` Λ tables, init 0,
Adam-amsgrad lr 1e-2, clip 1e-3, projection Λ ≥ 0), the hypergradient step
(``get_next_reg_emb_adam``: the "non-regularised" assumed gradient taken with the *current* Λ, then
2·Λ⊙Θ on the full tables without 1/B, a simulated Adam step with eps inside the root and the
pre-step count in the bias corrections, the validation BPR loss of one validation batch), its
sampler (``utils.data_loader.MFSampleGenerator``: one uniform negative per positive among items the
user has no training interaction with, redrawn every pass, shuffled batches of 1,024; validation
negatives avoid train ∪ validation; its rejection loop's merges duplicate the triples of a user who
drew the same colliding negative twice: on ml-100k about 1,200 of 57,221 a pass, so a pass holds ~58
batches while ``num_batches_train`` counts 56) and all its random draws.  **The assumed step consumes a batch of
its own from the shared training sampler**, so under ``dui`` the real MF sees every other batch and
an official "epoch" (``num_batches_train`` engine steps, the unit ``epoch`` counts here) is
``num_batches_train`` *real* MF steps, about two passes of the sampler; under ``fix`` it is one pass.
Settings: the checkout's own Amazon scripts, ``src/train_amazon_food_alter.py`` (``dui``) and
``src/train_amazon_food_fixed.py`` (``fix``), whose ``parser.set_defaults(...)`` literals are read
from the checkout with ``ast`` (not copied here) over ``engine.setup_args()``'s defaults.

What is ours
------------
* **Data hand-over.**  The checkout's loader reads raw files, filters and splits them itself.  The
  driver replaces its ``load_ui_data`` / ``filter_ui_data`` with our parts (:func:`hand_over`) and
  its ``split_lro`` with :func:`split_by_part`, so the released ``SampleGenerator.__init__`` runs on
  exactly our train / validation / test (ids are already 0-based and contiguous; every user and item
  is in train).  Under ``dui`` the validation handed over is the share our record's λ learned from:
  ``select_share`` (default 0.5, the paper tier's) of the validation is held out by our
  ``held_out_validation`` (same generator and seed) and only the rest reaches the λ step
  (``--select-share 0``: all of it, the released protocol).
* **Evaluation.**  The released ``utils/mp_cuda_evaluate.py`` needs CUDA and GPUtil; the driver
  replaces ``engine.evaluate_ui_uj_df`` (called where the engine evaluates, every ``eval_interval``
  epochs after the first step of the epoch) by one that takes the user and item tables out of the
  factorizer and scores them with our evaluator (``recrepro.evaluation.on_split.evaluate_on_split``, full ranking,
  optimistic ties): the test AUC, per-positive HR/NDCG@50/100 ranking the items not in
  train ∪ validation, exactly as our records; and the validation AUC **as our stopping rule computes
  it** (``recrepro.papers.lambdaopt.run``: for ``fix`` the whole validation with train masked;
  for ``dui`` with ``select_share`` the held-out share with train + the learned share masked).
* No stopping rule: the run trains ``--epochs`` epochs (``max_steps`` = epochs · num_batches + 1, so
  the last evaluation is the one after epoch ``--epochs``) and ``--compare`` applies our rule
  (best validation AUC, strict, patience 100) to the curve afterwards.

Runtime patches (the code was written for torch 1.x / Python 3.5; nothing in the checkout is edited)
--------------------------------------------------------------------------------------------------
1. ``tensorboardX`` and ``GPUtil`` are stub modules (a writer that drops everything; GPU queries that
   raise if ever called).
2. ``torch.optim.Optimizer.load_state_dict`` deep-copies the state dict first, as torch 1.x did:
   torch 2 shares the moment tensors, so the assumed factorizer's ``optimizer.step()`` (``copy`` loads
   the real optimizer's state) would move the *real* optimizer's Adam moments and step count too.
3. ``MFBPRFactorizer.update`` keeps the Adam step counts of ``optim_status`` as the integers they were
   before the assumed step (torch 1.x stored an ``int``; torch 2 a tensor the step increments in place,
   which would make the simulation use t + 1).
4. ``opt['load_in_queue'] = False``: the Amazon alter script lacks the key (``KeyError`` at the first
   sample).
5. ``fix`` runs ``train_fixed_reg``'s body for its one λ (``set_cur_lambda``, then
   ``train_an_episode``) instead of calling it: it unpacks ``train_an_episode``'s ``None`` and crashes
   after the first λ.
6. CPU: ``use_cuda`` off; no ``penalty_param_path`` (λ is read from the λ network instead).
7. Speed only: the sampler's ``DataLoader`` gathers a batch with one indexing (:data:`BATCHED_FETCH`)
   instead of one ``__getitem__`` per triple and a stack: the same tensors bit for bit.

Output: one JSON line per evaluation (``--out``): ``epoch`` (the engine's epoch index), ``steps``
(real MF steps so far), ``val_auc``, ``auc``, ``pp_hr@50/100``, ``pp_ndcg@50/100``, the mean user /
item λ (``dui``; the fixed λ for ``fix``), CPU seconds.  The pipeline reads it committed gzipped
(``gzip -9n``: ``results/paper/lambdaopt/official/<dataset>_<dui|fix>_seed<k>.jsonl.gz``).  ``--compare <our run folder>`` reads our
record's ``history.parquet`` (row ``epoch`` e is the state after e + 1 epochs: official epoch k is our
row k − 1; for a ``lambdaopt_dui_code`` record, whose epoch is one sampler pass with half its batches
real steps, our epoch 2k) and ``metrics.json`` and prints both validation curves at common epochs, each
side's best epoch and the test AUC there, and the largest gap (``--compare-only``: of an earlier ``--out``).  Without the checkout, torch/pandas, our package
or the split, it prints why it skips and exits 0.  Measured on ml-100k (one busy CPU core, nice 10):
see ``--help``'s epilogue.

    python benchmarks/official_lambdaopt.py --checkout /tmp/official_lambdaopt \\
        --split-dir data/splits/ml-100k/lambdaopt/temporal_user_ratio/seed0 --variant dui --epochs 100 \\
        --out /tmp/official_lambdaopt/ml-100k_dui_seed0.jsonl \\
        --compare results/paper/lambdaopt/runs/ml-100k/temporal_user_ratio/lambdaopt_dui/seed0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: the released training scripts whose ``set_defaults`` give each variant's settings (read from the checkout)
SCRIPTS = {"dui": "src/train_amazon_food_alter.py", "fix": "src/train_amazon_food_fixed.py"}
#: our test evaluation of the λOpt records (config.yaml ``evaluation.splits.temporal_user_ratio``),
#: restricted to the metrics the records' tables use (tests/test_official_lambdaopt_harness.py checks it)
TEST_SECTION = {"mode": "full", "fit": ["train"], "exclude": ["train", "validation"], "target": "test",
                "ks": [50, 100], "metrics": ["auc", "pp_hr", "pp_ndcg"], "rank_ties": "optimistic"}
METRICS = ["auc", "pp_hr@50", "pp_hr@100", "pp_ndcg@50", "pp_ndcg@100"]
PATIENCE = 100  # our stopping rule's (config.yaml lambdaopt.tiers.paper.settings.patience)

# The data hand-over: pure functions, also run by the driver (its source is pasted into it).
HANDOVER = r'''
def hand_over(train, validation, test):
    """Our three parts as the released loader's ``ui_history`` (``userId, itemId, timestamp``, sorted by
    user then time as ``load_ui_data`` sorts), with a ``part`` column for :func:`split_by_part`."""
    frames = [f[["user", "item", "timestamp"]].assign(part=name)
              for name, f in (("train", train), ("validation", validation), ("test", test))]
    out = pd.concat(frames, ignore_index=True).rename(columns={"user": "userId", "item": "itemId"})
    return out.sort_values(["userId", "timestamp"], kind="stable").reset_index(drop=True)


def split_by_part(ui_history, test_ratio=None, is_random=False):
    """``split_lro``'s place: its first call (all rows) returns (the rest, our test), its second (the
    rest) returns (our train, our validation), by the ``part`` column instead of ratios and time."""
    held = "test" if (ui_history["part"] == "test").any() else "validation"
    mask = (ui_history["part"] == held).to_numpy()
    rest, out = ui_history[~mask], ui_history[mask].drop(columns="part")
    return (rest.drop(columns="part") if held == "validation" else rest), out
'''

# Batches gathered with one indexing per batch instead of one Python call per sample and a stack (as
# benchmarks/official_fedrap.py does for FedRAP's loader): the same samples in the same order (the
# DataLoader's shuffle draws from torch's generator either way), so the same tensors bit for bit
# (tests/test_official_lambdaopt_harness.py); the per-sample path took a third of the time on ml-100k.
BATCHED_FETCH = r'''
def batch_triples(self, index):
    return [self.user_tensor[index], self.pos_item[index], self.neg_item[index]]


def batched_loader(dataset, **kwargs):
    return torch.utils.data.DataLoader(dataset, collate_fn=list, **kwargs)
'''

# The driver runs with the checkout's src/ and our src/ on sys.path; it is ours, written from the
# description above (the step loop it calls is the checkout's own ``Engine.train_an_episode``).
DRIVER = r'''
import ast, copy, json, random, sys, time, types
from pathlib import Path
import numpy as np, pandas as pd, torch
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
seed = spec["seed"]
random.seed(seed); np.random.seed(seed); torch.manual_seed(seed)
''' + HANDOVER + r'''
# 1. stub modules for what the CPU path never uses
class _Writer:
    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _no_gpu(*args, **kwargs):
    raise RuntimeError("GPUtil stub: the harness evaluates with recrepro's evaluator, not mp_cuda_evaluate")


for name, attrs in (("tensorboardX", {"SummaryWriter": _Writer}),
                    ("GPUtil", {"getAvailable": _no_gpu, "getGPUs": _no_gpu, "getFirstAvailable": _no_gpu})):
    sys.modules[name] = types.ModuleType(name)
    vars(sys.modules[name]).update(attrs)

# 2. torch 1.x's deep copy in Optimizer.load_state_dict
_load_state_dict = torch.optim.Optimizer.load_state_dict


def load_state_dict_copied(self, state_dict):
    return _load_state_dict(self, copy.deepcopy(state_dict))


torch.optim.Optimizer.load_state_dict = load_state_dict_copied

import engine as released
import utils.data_loader as data_loader
from factorizer.factorizer import MFBPRFactorizer

# 3. the Adam step counts of optim_status as they were before the assumed step (torch 1.x: an int)
_update = MFBPRFactorizer.update


def update_counting_as_ints(self, sampler, l2_lambda):
    steps = [int(v["step"]) for v in self.optimizer.state.values() if len(v) > 0]
    loss = _update(self, sampler, l2_lambda)
    if self.is_assumed and self.optim_status is not None:
        self.optim_status["step"] = steps
    return loss


MFBPRFactorizer.update = update_counting_as_ints
''' + BATCHED_FETCH + r'''
data_loader.UserPosNegDataset.__getitems__ = batch_triples
data_loader.DataLoader = batched_loader

from recrepro.evaluation.on_split import SplitData, evaluate_on_split
from recrepro.papers.lambdaopt.run import _held_out_auc, _validation_auc, _validation_section, held_out_validation

split = SplitData(spec["split_dir"])
train, validation, test = split.part("train"), split.part("validation"), split.part("test")
train_csr, validation_csr = split.csr(["train"]), split.csr(["validation"])
val_section = _validation_section(spec["test_section"])
share = spec["select_share"]
held_out = None
if spec["variant"] == "dui" and share:
    learn, targets = held_out_validation(validation_csr, share, seed)
    held_out = ((train_csr + learn).tocsr(), targets)
    coo = learn.tocoo()
    keep = pd.DataFrame({"user": coo.row.astype(validation["user"].dtype), "item": coo.col.astype(validation["item"].dtype)})
    validation = validation.merge(keep, on=["user", "item"], how="inner")

ratings = hand_over(train, validation, test)
data_loader.load_ui_data = lambda data_type, data_path: ratings
data_loader.filter_ui_data = lambda ui_data, **kwargs: ui_data
data_loader.split_lro = split_by_part

# the settings: engine.setup_args()'s defaults, then the script's set_defaults literals, then ours
opt = vars(released.setup_args().parse_args(args=[]))
tree = ast.parse(Path(spec["script"]).read_text())
calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "set_defaults"]
for kw in calls[0].keywords:  # literals, and int(1e9) (freq_threshold_ub): int/float of a literal
    value = kw.value
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") in ("int", "float") and len(value.args) == 1:
        opt[kw.arg] = {"int": int, "float": float}[value.func.id](ast.literal_eval(value.args[0]))
    else:
        opt[kw.arg] = ast.literal_eval(value)
opt.update(spec["overrides"])
work = spec["work"]
opt.update({"data_type": "recrepro-split-mf", "data_path": spec["split_dir"], "reconstruct_data": True,
            "filtered_data_path": f"{work}/ui_history.csv", "eval_res_path": work + "/{epoch_idx}.csv",
            "penalty_param_path": None, "tensorboard": work, "use_cuda": False, "device_ids_test": [],
            "load_in_queue": False, "eval_interval": spec["eval_every"]})
print(json.dumps({"settings_from": spec["script"]}), file=sys.stderr, flush=True)

engine = released.Engine(opt)
sampler = engine._sampler
assert (sampler.num_users, sampler.num_items) == (split.n_users, split.n_items), (sampler.num_users, split.n_users)
assert len(sampler.train_ui_history) == len(train) and len(sampler.test_ui_history) == len(test)
assert len(sampler.valid_ui_history) == len(validation)
started = time.process_time()
out = open(spec["out"], "a")


def evaluate_with_ours(model, eval_res_path, **kwargs):
    """``evaluate_ui_uj_df``'s place: our evaluator on the factorizer's tables."""
    epoch = int(Path(eval_res_path).stem)
    tables = (model.embedding_user.weight.detach().cpu().numpy(), model.embedding_item.weight.detach().cpu().numpy())
    if held_out is None:
        val_auc = _validation_auc(tables, split, val_section, "cpu", 2048)
    else:
        val_auc = _held_out_auc(tables, held_out, val_section, "cpu", 2048)
    result = evaluate_on_split(tables, split, spec["test_section"], device="cpu", batch_size=2048).overall
    row = {"epoch": epoch, "steps": int(engine._factorizer.train_step_idx), "variant": spec["variant"],
           "seed": seed, "val_auc": float(val_auc), **{k: float(result[k]) for k in spec["metrics"]}}
    net = getattr(engine._regularizer, "lambda_network", None)
    if net is not None:
        row["lambda_user_mean"] = float(net.user_lambda.detach().mean())
        row["lambda_item_mean"] = float(net.item_lambda.detach().mean())
        row["select_share"] = share
    else:
        row["lam"] = float(engine._regularizer._cur_lambda.reshape(-1)[0])
    row["cpu_seconds"] = time.process_time() - started
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(json.dumps(row), file=sys.stderr, flush=True)
    return {"auc": row["auc"], "hr": row["pp_hr@100"], "ndcg": row["pp_ndcg@100"]}


released.evaluate_ui_uj_df = evaluate_with_ours
max_steps = spec["epochs"] * sampler.num_batches_train + 1
if spec["variant"] == "dui":
    engine._opt["max_steps"] = max_steps
    engine.train_alter_reg()
else:
    # 5. train_fixed_reg's body for its one λ (train_fixed_reg itself unpacks None after it)
    engine.mode = "complete"
    assert engine._regularizer.set_cur_lambda()
    engine.train_an_episode(max_steps=max_steps)
out.close()
'''


def skip(reason: str) -> int:
    print(f"official_lambdaopt: skipped: {reason}")
    return 0


def read_rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _official_module():
    """``recrepro.papers.lambdaopt.official``: the stopping rule and the epoch alignment the table uses."""
    if str(REPO / "src") not in sys.path:
        sys.path.insert(0, str(REPO / "src"))
    from recrepro.papers.lambdaopt import official

    return official


def best_by_validation(curve: list[tuple[int, float]], patience: int | None = PATIENCE) -> dict:
    """Our stopping rule (without ``wait_for_gain``) on a curve ``[(epoch, val_auc)]``: ``best_epoch``,
    ``best_val_auc``, ``stopped_at`` (``None``: the curve ends before the rule would stop)."""
    return _official_module().best_by_validation(curve, patience)


def epochs_per_official_epoch(record: Path) -> int:
    """How many of the record's epochs make one official epoch (2 under ``assumed_batch: separate``)."""
    return _official_module().epochs_per_official_epoch(record)


def our_curve(record: Path) -> tuple[list[tuple[int, float]], dict]:
    """Our record's validation curve in official epochs (λFix: the selected λ's) and its metrics.json."""
    return _official_module().our_curve(record)


def compare(official: list[dict], record: Path, every: int = 25) -> dict:
    """Both validation curves at common epochs, each side's best epoch and test AUC there, the largest gap."""
    ours, metrics = our_curve(record)
    ours_at = dict(ours)
    common = [(r["epoch"], r["val_auc"], ours_at[r["epoch"]]) for r in official if r["epoch"] in ours_at]
    if not common:
        return {"epochs_compared": 0}
    gaps = [o - w for _, o, w in common]
    worst = max(range(len(gaps)), key=lambda k: abs(gaps[k]))
    rule = best_by_validation([(r["epoch"], r["val_auc"]) for r in official if r["epoch"] > 0])
    at_best = next(r for r in official if r["epoch"] == rule["best_epoch"])
    last_common = common[-1][0]
    ours_within = best_by_validation([c for c in ours if c[0] <= last_common], patience=None)
    stopping = metrics.get("stopping", {})
    per = epochs_per_official_epoch(record)
    table = [{"epoch": e, "official_val_auc": round(o, 4), "ours_val_auc": round(w, 4), "gap": round(o - w, 4)}
             for e, o, w in common if e % every == 0 or e == last_common]
    return {"epochs_compared": len(common), "first_epoch": common[0][0], "last_epoch": last_common,
            "curve": table,
            "max_abs_gap_val_auc": abs(gaps[worst]), "epoch_of_max_gap": common[worst][0],
            "mean_abs_gap_val_auc": sum(map(abs, gaps)) / len(gaps),
            "official_best_epoch": rule["best_epoch"], "official_best_val_auc": rule["best_val_auc"],
            "official_rule_stopped_at": rule["stopped_at"],
            "official_test_at_best": {k: at_best[k] for k in METRICS},
            "official_last": {"epoch": official[-1]["epoch"], **{k: official[-1][k] for k in ("val_auc", *METRICS)}},
            "ours_best_epoch_within_common": ours_within["best_epoch"],
            "ours_best_val_auc_within_common": ours_within["best_val_auc"],
            "ours_epochs_per_official_epoch": per,   # the record's own epoch numbers below divided by it
            "ours_best_epoch": _official(stopping.get("best_epoch"), per),
            "ours_best_val_auc": stopping.get("best_val_auc"),
            "ours_stopped": f"{stopping.get('stopped')} after {_official(stopping.get('epochs_trained'), per)}",
            "ours_test_at_best": {k: metrics["overall"][k] for k in METRICS},
            "ours_last": {"epoch": _official(stopping.get("epochs_trained"), per), **metrics.get("last_epoch", {})}}


def _official(epoch: int | None, per: int) -> float | int | None:
    """One of our epoch numbers in official epochs."""
    return None if epoch is None else (epoch // per if epoch % per == 0 else epoch / per)


def missing(checkout: Path, split_dir: Path) -> str | None:
    """Why the run cannot start (``None``: it can)."""
    for name in ("torch", "pandas", "pyarrow"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed"
    if not (REPO / "src" / "recrepro" / "evaluation" / "on_split.py").is_file():
        return f"no recrepro package under {REPO / 'src'}"
    needed = ("src/engine.py", "src/regularizer/regularizer.py", "src/utils/data_loader.py", *SCRIPTS.values())
    absent = [p for p in needed if not (checkout / p).is_file()]
    if absent:
        return f"no yihong-chen/lambda-opt checkout at {checkout} ({', '.join(absent)} missing)"
    parts = [p for p in ("train", "validation", "test", "manifest") if
             not (split_dir / (f"{p}.json" if p == "manifest" else f"{p}.parquet")).is_file()]
    if parts:
        return f"no λOpt split at {split_dir} ({', '.join(parts)} missing)"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Measured on ml-100k (917 users, 939 items, 56 batches an epoch; torch 2.13 on one thread of a "
               "2-core machine busy with other jobs, nice 10): dui 2.75 CPU-s an epoch, fix 0.86, each with an "
               "evaluation every epoch (300 dui epochs: 14 CPU-min; 420 fix epochs: 6).")
    parser.add_argument("--checkout", type=Path,
                        help="a checkout of yihong-chen/lambda-opt@fdaa44d outside this repository")
    parser.add_argument("--split-dir", type=Path,
                        help="a temporal_user_ratio λOpt split (train/validation/test.parquet, manifest.json)")
    parser.add_argument("--variant", choices=sorted(SCRIPTS), default="dui")
    parser.add_argument("--lam", type=float, default=None, help="fix: the one λ (our λFix record's selected_lam)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--eval-every", type=int, default=1, help="evaluate every this many epochs "
                                                                  "(the Amazon alter script's eval_interval: 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--select-share", type=float, default=0.5,
                        help="dui: the share of validation held out from the λ step and scored for val_auc "
                             "(our paper tier's 0.5); 0: the λ step learns on all of it and val_auc scores all")
    parser.add_argument("--out", type=Path, required=True, help="JSON lines, one per evaluation (overwritten)")
    parser.add_argument("--compare", type=Path, default=None,
                        help="our run folder (history.parquet, metrics.json) to compare with")
    parser.add_argument("--compare-only", action="store_true", help="compare the existing --out, do not train")
    args = parser.parse_args(argv)
    if not args.compare_only and (args.checkout is None or args.split_dir is None):
        parser.error("--checkout and --split-dir are needed to train (--compare-only: not)")
    if args.variant == "fix" and args.lam is None and not args.compare_only:
        parser.error("--variant fix needs --lam")
    if not args.compare_only:
        reason = missing(args.checkout, args.split_dir)
        if reason:
            return skip(reason)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("")
        overrides = {"fixed_lambda_candidate": [args.lam]} if args.variant == "fix" else {}
        with tempfile.TemporaryDirectory() as work:
            spec = {"variant": args.variant, "seed": args.seed, "epochs": args.epochs, "eval_every": args.eval_every,
                    "split_dir": str(args.split_dir.resolve()), "out": str(args.out.resolve()), "work": work,
                    "script": str((args.checkout / SCRIPTS[args.variant]).resolve()), "overrides": overrides,
                    "select_share": args.select_share if args.variant == "dui" else None,
                    "test_section": TEST_SECTION, "metrics": METRICS}
            driver = Path(work) / "driver.py"
            driver.write_text(DRIVER)
            env = {"PYTHONPATH": os.pathsep.join([str((args.checkout / "src").resolve()), str(REPO / "src")]),
                   "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "PYTHONWARNINGS": "ignore"}
            with open(f"{args.out}.log", "w") as log:  # the released code prints every step
                subprocess.run([sys.executable, str(driver), json.dumps(spec)], cwd=args.checkout / "src",
                               check=True, env=env, stdout=log)
    rows = read_rows(args.out)
    result = {"variant": args.variant, "evaluations": len(rows), "out": str(args.out)}
    if args.compare is not None:
        if not (args.compare / "history.parquet").is_file():
            return skip(f"no run record at {args.compare} (history.parquet)")
        result.update(compare(rows, args.compare))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
