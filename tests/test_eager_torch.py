"""The command line's stand-in for ``torch._dynamo``: same numbers, real module on demand, can be turned off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from recrepro.runtime.eager_torch import DYNAMO_ENV

# Adam with coupled weight decay, a few steps, then a checkpoint round trip of the optimizer state
# (``state_dict``/``load_state_dict`` are the other wrapped methods): the parameters' bytes and which
# ``torch._dynamo`` the process ended up with.
_TRAIN = r"""
import hashlib, json, sys
from recrepro.runtime.eager_torch import defer_dynamo, _STAND_IN
defer_dynamo()
import torch
torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(50, 8))
opt = torch.optim.Adam([w], lr=0.05, weight_decay=1e-3)
for _ in range(5):
    opt.zero_grad()
    loss = (w @ w.T).sigmoid().sum()
    loss.backward()
    opt.step()
opt2 = torch.optim.Adam([w], lr=0.05, weight_decay=1e-3)
opt2.load_state_dict(opt.state_dict())
opt2.step()
out = {"digest": hashlib.sha256(w.detach().numpy().tobytes()).hexdigest(),
       "stand_in": sys.modules["torch._dynamo"] is _STAND_IN}
if len(sys.argv) > 1:  # ask for something only the real module has
    out["real_attr"] = type(getattr(torch._dynamo, sys.argv[1])).__name__
    out["stand_in_after"] = sys.modules["torch._dynamo"] is _STAND_IN
print(json.dumps(out))
"""


def _run(*args: str, dynamo_env: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != DYNAMO_ENV}
    env["OMP_NUM_THREADS"] = "1"
    if dynamo_env is not None:
        env[DYNAMO_ENV] = dynamo_env
    out = subprocess.run([sys.executable, "-c", _TRAIN, *args], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_optimizer_steps_give_the_same_bytes_with_and_without_the_stand_in():
    deferred = _run()
    real = _run(dynamo_env="1")
    assert deferred["stand_in"] is True  # the optimizers never asked for more than disable/graph_break
    assert real["stand_in"] is False     # RECREPRO_TORCH_DYNAMO=1 loads the real module
    assert deferred["digest"] == real["digest"]


def test_any_other_attribute_loads_the_real_module_in_its_place():
    out = _run("config")  # torch._dynamo.config: a config module object the stand-in does not have
    assert out["real_attr"].startswith("ConfigModule")
    assert out["stand_in_after"] is False


def test_the_command_line_registers_it_and_a_library_import_does_not():
    library = ("import sys, recrepro.evaluation, recrepro.papers.prism.trainer;"
               "print(sys.modules.get('torch._dynamo') is None)")
    out = subprocess.run([sys.executable, "-c", library], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "True"
    command = ("import sys\nfrom recrepro.cli.main import main\nfrom recrepro.runtime.eager_torch import _STAND_IN\n"
               "try:\n    main(['data', '--help'])\nexcept SystemExit:\n    pass\n"
               "print(sys.modules.get('torch._dynamo') is _STAND_IN)")
    out = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"
