"""Run the released PRISM code (snap-research/PRISM) beside ours on one of our PRISM splits, epoch by epoch.

Does our PRISM trainer follow the released code?  Two setups (``--setup``): ``nlmf-directau`` (default:
non-linear MF + DirectAU, docs/deviations.md#prism-nlmf-official) and ``mf-ssm`` (MF + SSM with a given
coupled weight decay and learning rate, ``--weight-decay`` / ``--lr``).  Nothing of the released code is
kept in this repository: give the path of a checkout *outside* it, e.g.::

    git --git-dir=<mirror of snap-research/PRISM> archive HEAD \\
        models.py losses.py train.py dataloader.py evaluation_metrics.py utils.py | tar -x -C /work/official/prism

and a Python that can import it (``--python``): torch and torch-geometric (the released code also imports
numpy, scikit-learn, networkx, matplotlib, tqdm).  pyg-lib and torch-sparse have no wheels for our torch;
the released MF and NL-MF paths both sample 0 hops (``MLP`` models: ``LinkNeighborLoader(num_neighbors=[])``),
so the driver gives torch-geometric's ``NeighborSampler`` the 0-hop answer itself (the batch's seed users and
its distinct seed items, no edges) and refuses anything else.

The driver (ours, written into a temporary folder) writes ``--split-dir``'s training, validation and test
parts as the ``train_<seed>.pt`` / ``val_<seed>.pt`` / ``test_<seed>.pt`` graphs the released ``Data``
reads (the training edges in one seeded random order, as ``RandomLinkSplit`` leaves them; the loader
never shuffles), then runs the released ``get_dataloaders``, ``RecModel`` (``MLP``, ``act='ReLU'`` as
``train.py`` passes it), ``Trainer`` and ``Trainer.train_model`` for ``--epochs`` epochs with patience
beyond the epochs, at ``run_train_prism.sh``'s settings for the setup:

``nlmf-directau``
    its DirectAU line: 2 layers, ``align`` + ``uniformity``, γ 1, batch 4096, lr 1e-3, wd 0,
    ``--degree_init True`` (PRISM magnitudes), α 1, dim 64.
``mf-ssm``
    0 layers (MF), ``SSM`` (cosine scores over τ 0.2, ``losses.SSMLoss``), batch 16384, ``NEG_RATIOS=(20)``
    negatives per positive, drawn by ``train_model`` uniformly from the batch's distinct positive items;
    no regulariser (``--reg_types -1``: the script's ``REG='uniformity'`` is meant for ``align``); weight
    decay as Adam's ``weight_decay`` on every parameter (``--batched_wd False``); Xavier-uniform init
    (``--init xavier``, the weight-decay baseline; ``--init prism``: ``--degree_init True``, α 1); dim 64.

``--init`` and ``--weight-decay`` / ``--lr`` override the setup's values.  The cosine-score validation pass
of every epoch is skipped (its value is not used for model selection).  ``--ours`` then trains ours
(``recrepro.papers.prism.trainer.train`` at the paper tier's settings, ``prism.switches`` from
``config.yaml``) for the same epochs, in this process: ``nlmflinear`` / ``nlmf`` stand for
``<backbone>_directau_prism``, any other name is one of our run names (``mf_ssm_wd1em4_lr1em2``,
:mod:`recrepro.papers.prism.methods`); ``NAME@switch=value,...`` overrides switches for that run, e.g.
``mf_ssm_wd1em4_lr1em2@negatives=in_batch,ssm_negatives=code``.

Writes one JSON: per side, the initial embedding norms (mean row norm; under PRISM the max abs difference
from α·ln(deg + 2) + 1 − α, under Xavier the largest entry over the bound √(6/(n + d))), the per-epoch
training loss, training seconds and validation NDCG@20 (dot product, training items masked; the released
metric leaves out the last user in sorted order), and prints a table and each side's best epoch.  Without
the checkout or the split it prints why it skips and exits 0.  Measured (2-core machine shared with other
training jobs, one thread each), gowalla: NL-MF + DirectAU 90-200 s an epoch for the released code, 45 s
for ours; MF + SSM 66 s an epoch released (48 s of it training), 17 s ours, 28 s ours under the code's
negatives (``@negatives=in_batch,ssm_negatives=code``).  MF + SSM at λ 1e-4, lr 0.01, seed 123, 8 epochs:
the released code peaks at epoch 3 (validation NDCG@20 0.0862, 0.0792 at epoch 8), ours under the code's
negatives at epoch 3 too (0.0877, then 0.0690), ours under the paper's (uniform, 10) at epoch 2 (0.0819,
then 0.043).  At λ 0 the released code still climbs at epoch 7 (0.0847), ours under the code's negatives
at epoch 8 (0.0765), ours under the paper's peaks at epoch 3 (0.0566).  Our ``in_batch`` drew from the
batch's positives with multiplicity in these runs; it now draws uniformly from their distinct items, as the
released loader does (docs/deviations.md#prism-ssm-official).

    .venv/bin/python benchmarks/official_prism.py --checkout /work/official/prism \\
        --python /work/official/venv/bin/python \\
        --split-dir data/splits/gowalla/prism/random_ratio/seed123 --epochs 10 \\
        --ours nlmflinear nlmf --out /tmp/official_prism_gowalla.json
    .venv/bin/python benchmarks/official_prism.py --checkout /work/official/prism \\
        --python /work/official/venv/bin/python --setup mf-ssm --weight-decay 1e-4 --lr 0.01 \\
        --split-dir data/splits/gowalla/prism/random_ratio/seed123 --epochs 8 \\
        --ours mf_ssm_wd1em4_lr1em2 --out /tmp/official_prism_ssm.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: run_train_prism.sh's DirectAU line (MODEL=MLP, NUM_LAYERS=2, LOSS=align, REG=uniformity, GAMMA=1.0)
OFFICIAL_ARGS = {"dataset": "Gowalla", "model": "MLP", "num_layers": 2, "hidden_dim": 64, "lr": 1e-3,
                 "weight_decay": 0.0, "loss": "align", "regs": ["uniformity"], "gammas": [1.0], "batch_size": 4096,
                 "neg_ratio": 0, "batched_wd": False, "degree_init": True, "degree_init_str": 1.0}
#: run_train_prism.sh's SSM line on MF (MODEL=MLP, NUM_LAYERS=0, LOSS=SSM: batch 16384, NEG_RATIOS=(20)),
#: no regulariser, Adam's weight decay, Xavier init (the weight-decay baseline)
OFFICIAL_SSM_ARGS = {**OFFICIAL_ARGS, "num_layers": 0, "loss": "SSM", "regs": [], "gammas": [], "batch_size": 16384,
                     "neg_ratio": 20, "degree_init": False}
SETUPS = {"nlmf-directau": OFFICIAL_ARGS, "mf-ssm": OFFICIAL_SSM_ARGS}

# Runs with the checkout on sys.path, under --python; ours, written from the released train.py's main()
# as described above, not a copy of it.
DRIVER = r'''
import functools, json, sys, time, types
import numpy as np, pandas as pd, torch
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
from torch_geometric.data import HeteroData
from torch_geometric.sampler import HeteroSamplerOutput
from torch_geometric.sampler.neighbor_sampler import NeighborSampler

_sample = NeighborSampler._sample
def zero_hop(self, seed, seed_time=None, **kwargs):
    if not (isinstance(seed, dict) and self.num_neighbors.num_hops == 0):
        return _sample(self, seed, seed_time, **kwargs)  # needs pyg-lib / torch-sparse, as released
    empty = torch.empty(0, dtype=torch.long)
    none = {et: empty for et in self.edge_types}
    return HeteroSamplerOutput(node={nt: seed.get(nt, empty) for nt in self.node_types}, row=none,
                               col=dict(none), edge=dict(none), batch=None)
NeighborSampler._sample = zero_hop

# our split as the graphs the released Data.get_dataloaders loads
man = json.load(open(spec["split_dir"] + "/manifest.json"))
nu, ni = man["n_users"], man["n_items"]
def edges(part):
    df = pd.read_parquet(spec["split_dir"] + f"/{part}.parquet")
    return torch.from_numpy(np.stack([df["user"].to_numpy(np.int64), df["item"].to_numpy(np.int64)]))
tr = edges("train")
tr = tr[:, torch.randperm(tr.shape[1], generator=torch.Generator().manual_seed(spec["seed"]))]
va, te = edges("validation"), edges("test")
def graph(messages, labels):
    g = HeteroData()
    for nt, n in (("user", nu), ("item", ni)):
        g[nt].num_nodes = n
        g[nt].x = torch.Tensor([])
    g["user", "rates", "item"].edge_index = messages
    g["item", "rated_by", "user"].edge_index = messages.flip(0)
    g["user", "rates", "item"].link_index = labels
    g["user", "rates", "item"].link = torch.ones(labels.shape[1])
    return g
seed, folder = spec["seed"], spec["graphs"] + "/"
torch.save(graph(tr, tr), folder + f"train_{seed}.pt")
torch.save(graph(tr, va), folder + f"val_{seed}.pt")
torch.save(graph(torch.cat([tr, va], 1), te), folder + f"test_{seed}.pt")

torch.load = functools.partial(torch.load, weights_only=False)  # the graphs are pickles (torch >= 2.6)
import utils
utils.ALL_DATASET_ATTRS.setdefault("Gowalla", {"user": "user", "action": "rates", "item": "item",
                                               "inverse_action": "rated_by"})
import train as released
from torch_geometric import seed_everything

_ndcg = released.Trainer.forward_and_get_ndgc
def dot_only(self, *args, method="dot_prod", **kwargs):
    return float("nan") if method == "cosine_sim" else _ndcg(self, *args, method=method, **kwargs)
released.Trainer.forward_and_get_ndgc = dot_only

args = types.SimpleNamespace(seed=seed, **spec["args"])
seed_everything(seed)
device = torch.device("cpu")
data = released.Data(args.dataset, None, folder)
loader, train_data, val_data, user_mag, item_mag, user_deg, item_deg = data.get_dataloaders(
    device, num_layers=0, num_neighs=-1, batch_size=args.batch_size, testing=False, seed=seed,
    degree_init_str=args.degree_init_str)
data.data = train_data
model = released.RecModel(data, train_data["user"].num_nodes, train_data["item"].num_nodes, args.model,
                          hidden_dim=args.hidden_dim, depth=args.num_layers, device=device,
                          user_mag=user_mag if args.degree_init else None,
                          item_mag=item_mag if args.degree_init else None, loss=args.loss, act="ReLU")
init, a = {}, args.degree_init_str
with torch.no_grad():
    tables = (("user", model.user_embedding.weight, user_deg), ("item", model.item_embedding.weight, item_deg))
    for side, table, deg in tables:
        norms = table.double().norm(dim=1)
        init[f"{side}_norm_mean"] = float(norms.mean())
        if args.degree_init:  # the formula on the training degrees, in float64
            init[f"{side}_norm_max_abs_diff"] = float((norms - a * torch.log(deg.double() + 2) - (1 - a)).abs().max())
        else:
            init[f"{side}_abs_max_over_xavier_bound"] = float(table.abs().max() / (6 / sum(table.shape)) ** 0.5)
if args.num_layers:
    init["tower_bias"] = model.encoder.user_mlp[0].bias is not None
started = time.time()
loss, val, *_, times = released.Trainer(args.model, model, device, data, args).train_model(
    loader, train_data, val_data, epochs=spec["epochs"], num_saves=30, early_stop_cutoff=spec["epochs"] + 1)
json.dump({"init": init, "loss": loss, "val_ndcg": [v[0] for v in val], "epoch_seconds": times,
           "seconds": time.time() - started}, open(spec["out"], "w"))
'''


def skip(reason: str) -> int:
    print(f"official_prism: skipped: {reason}")
    return 0


def official_args(setup: str, weight_decay: float | None, lr: float | None, init: str | None) -> dict:
    """The released ``train.py`` arguments of ``setup`` with the command line's overrides."""
    args = dict(SETUPS[setup])
    if weight_decay is not None:
        args["weight_decay"] = weight_decay
    if lr is not None:
        args["lr"] = lr
    if init is not None:
        args["degree_init"] = init == "prism"
    return args


def run_official(checkout: Path, python: str, split_dir: Path, epochs: int, seed: int,
                 args: dict | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        driver, out = Path(tmp) / "driver.py", Path(tmp) / "out.json"
        driver.write_text(DRIVER)
        spec = {"split_dir": str(split_dir.resolve()), "graphs": tmp, "out": str(out), "seed": seed,
                "epochs": epochs, "args": OFFICIAL_ARGS if args is None else args}
        subprocess.run([python, str(driver), json.dumps(spec)], cwd=checkout, check=True,
                       env={"PYTHONPATH": str(checkout.resolve()), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
        return json.loads(out.read_text())


def resolve_ours(token: str, switches: dict) -> tuple[str, dict[str, str]]:
    """``nlmf`` / ``nlmflinear`` -> ``<backbone>_directau_prism``; ``NAME@k=v,...`` -> (NAME, ``switches`` with
    the overrides).  Raises ``ValueError`` (one line) for a name our methods do not parse, a malformed override
    or a switch ``config.yaml``'s ``prism.switches`` does not have."""
    from recrepro.papers.prism.methods import method_name, parse_method

    name, _, tail = token.partition("@")
    if name in ("nlmf", "nlmflinear"):
        name = method_name(name, "directau", alpha=1.0)
    parse_method(name)
    items = [item.split("=") for item in tail.split(",")] if tail else []
    if any(len(kv) != 2 or not all(kv) for kv in items):
        raise ValueError(f"{token!r}: overrides must read NAME@switch=value,switch=value")
    if unknown := {k for k, _ in items} - set(switches):
        raise ValueError(f"unknown prism switch(es) {sorted(unknown)}; known: {sorted(switches)}")
    return name, {**switches, **{k: {"true": True, "false": False}.get(v, v) for k, v in items}}


def run_ours(token: str, split_dir: Path, epochs: int, seed: int) -> dict:
    """Our run ``token`` (:func:`resolve_ours`) at the paper tier's settings, ``epochs`` epochs, no early stop."""
    import numpy as np
    import torch

    from recrepro.config import load_config
    from recrepro.models.backbones import build_net
    from recrepro.papers.prism.run import settings_for
    from recrepro.papers.prism.trainer import TrainSettings, train
    from recrepro.evaluation.on_split import SplitData

    torch.set_num_threads(1)
    config = load_config(REPO / "config.yaml")
    method, switches = resolve_ours(token, config["prism"]["switches"])
    name, settings = settings_for(method, config["prism"]["tiers"]["paper"], switches, seed, "cpu")
    settings = TrainSettings(backbone=name, **{**settings, "epochs": epochs, "patience": epochs + 1})
    split = SplitData(split_dir)
    train_m, val_m = split.csr(["train"]), split.csr(["validation"])
    # the trainer's initial tables, rebuilt as train() builds them, for their norms
    torch.manual_seed(settings.seed)
    net = build_net(name, *train_m.shape, settings.dim, settings.seed, train=train_m, nlmf_relu=settings.nlmf_relu)
    degrees = (np.diff(train_m.indptr).astype(float), np.bincount(train_m.indices, minlength=train_m.shape[1]))
    if settings.alpha is not None:
        net.apply_prism(*degrees, settings.alpha)
    init = {}
    with torch.no_grad():
        for side, table_, deg in (("user", net.user_emb, degrees[0]), ("item", net.item_emb, degrees[1])):
            norms = table_.double().norm(dim=1).numpy()
            init[f"{side}_norm_mean"] = float(norms.mean())
            if settings.alpha is not None:
                target = settings.alpha * np.log(deg + 2.0) + 1.0 - settings.alpha  # float64
                init[f"{side}_norm_max_abs_diff"] = float(np.abs(norms - target).max())
            else:
                init[f"{side}_abs_max_over_xavier_bound"] = float(table_.abs().max() / (6 / sum(table_.shape)) ** 0.5)
    started = time.time()
    _, history = train(train_m, val_m, settings)
    return {"method": method, "switches": switches, "init": init, "loss": history["loss"],
            "val_ndcg": history["val_ndcg"], "epoch_seconds": history["epoch_seconds"],
            "seconds": time.time() - started}


def table(sides: dict[str, dict]) -> str:
    names = list(sides)
    lines = ["| epoch | " + " | ".join(f"{n} loss | {n} val NDCG@20" for n in names) + " |",
             "|---|" + "---|---|" * len(names)]
    for e in range(max(len(s["loss"]) for s in sides.values())):
        cells = []
        for n in names:
            s = sides[n]
            cells += [f"{s['loss'][e]:.4f}" if e < len(s["loss"]) else "–",
                      f"{s['val_ndcg'][e]:.5f}" if e < len(s["val_ndcg"]) else "–"]
        lines.append(f"| {e + 1} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(name: str, side: dict) -> str:
    """One line: the initial norms check, the best validation epoch (1-based) and the seconds an epoch."""
    init = {k: round(v, 8) for k, v in side["init"].items() if not isinstance(v, bool)}
    val = side["val_ndcg"]
    best = max(range(len(val)), key=val.__getitem__) + 1 if val else None
    seconds = side.get("epoch_seconds") or []
    per_epoch = f"{sum(seconds) / len(seconds):.1f}" if seconds else "?"
    return (f"{name} init {init} best epoch {best} ({val[best - 1]:.5f}) training s/epoch {per_epoch}, "
            f"{side['seconds']:.0f} s in all" if best else f"{name} init {init}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkout", type=Path, required=True, help="a checkout of snap-research/PRISM outside this repository")
    parser.add_argument("--python", default=sys.executable, help="a Python with torch and torch-geometric")
    parser.add_argument("--split-dir", type=Path, required=True)
    parser.add_argument("--setup", choices=sorted(SETUPS), default="nlmf-directau", help="the released run to drive")
    parser.add_argument("--weight-decay", type=float, help="released Adam weight_decay (default: the setup's, 0)")
    parser.add_argument("--lr", type=float, help="released learning rate (default: the setup's, 1e-3)")
    parser.add_argument("--init", choices=["prism", "xavier"], help="released init (default: the setup's)")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--ours", nargs="*", default=[], metavar="NAME[@switch=value,...]",
                        help="nlmf, nlmflinear or one of our PRISM run names, e.g. mf_ssm_wd1em4_lr1em2")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.ours:
        from recrepro.config import load_config

        switches = load_config(REPO / "config.yaml")["prism"]["switches"]
        for token in args.ours:
            try:
                resolve_ours(token, switches)
            except ValueError as err:
                parser.error(f"--ours {token}: {err}")
    if not all((args.checkout / f).is_file() for f in ("models.py", "losses.py", "train.py", "dataloader.py")):
        return skip(f"no snap-research/PRISM checkout at {args.checkout} (models.py, losses.py, train.py, dataloader.py)")
    if not (args.split_dir / "manifest.json").is_file():
        return skip(f"no split at {args.split_dir}")
    released = official_args(args.setup, args.weight_decay, args.lr, args.init)
    sides = {"official": run_official(args.checkout, args.python, args.split_dir, args.epochs, args.seed, released)}
    for token in args.ours:
        sides[token] = run_ours(token, args.split_dir, args.epochs, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"split_dir": str(args.split_dir), "epochs": args.epochs, "seed": args.seed,
                                    "setup": args.setup, "official_args": released, "sides": sides}))
    for name, side in sides.items():
        print(summary(name, side))
    print(table(sides))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
