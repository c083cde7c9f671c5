"""`ckpt sweep --scheduler`: the same sweep on a real Dask cluster (a LocalCluster of separate worker processes),
including a worker killed in the middle of a point, and sweeps of several models in one command."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_support import ckpt
from distributed import LocalCluster

from ckpt.budgets.tasks import KILL_HOOK
from ckpt.examples import write_example

pytestmark = pytest.mark.slow
SWEEP = ["--target", "none", "--time-limit", "30"]



@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5)
    return folder


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resnet")
    write_example("resnet", folder)
    return folder


def _table(outdir) -> list[dict]:
    """The sweep's rows without what is timed (seconds)."""
    return [{k: v for k, v in row.items() if k != "seconds"}
            for row in json.loads((outdir / "sweep.json").read_text())["points"]]


def test_a_dask_cluster_gives_the_local_table_even_when_a_worker_dies_mid_point(mlp, tmp_path, monkeypatch):
    local = tmp_path / "local"
    assert ckpt("sweep", "0.5:0.9", "--step", "0.2", "--model", str(mlp), "-o", str(local), *SWEEP).returncode == 0
    # the worker that starts replaying 0.7 dies (SIGKILL) the first time: Dask reruns the point elsewhere
    monkeypatch.setenv(KILL_HOOK, "replay:0.7")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        remote = tmp_path / "remote"
        run = ckpt("sweep", "0.5:0.9", "--step", "0.2", "--model", str(mlp), "-o", str(remote), *SWEEP,
                   "--scheduler", cluster.scheduler_address)
    assert run.returncode == 0, run.stderr
    assert "Dask cluster" in run.stderr
    assert (remote / "points" / "0.7" / ".killed-replay").is_file()          # the worker did die
    said = "left the cluster: Dask runs its task again elsewhere"
    assert said in run.stderr and said in (remote / "sweep.log").read_text()
    assert _table(remote) == _table(local)
    assert not list(remote.rglob(".*.tmp")) and not list(remote.rglob(".code.*"))
    for label in ("baseline", "0.9", "0.7", "0.5"):
        assert (remote / "points" / label / "point.json").is_file()


def test_a_cluster_without_workers_or_with_threaded_workers_is_refused(mlp, tmp_path):
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None,
                      scheduler_port=0) as cluster:
        run = ckpt("sweep", "0.9:0.9", "--model", str(mlp), "-o", str(tmp_path / "out"), *SWEEP,
                   "--scheduler", cluster.scheduler_address)
    assert run.returncode == 1 and "runs 2 tasks at once" in run.stderr and "--nthreads 1" in run.stderr
    run = ckpt("sweep", "0.9:0.9", "--model", str(mlp), "-o", str(tmp_path / "out"), *SWEEP,
               "--scheduler", "tcp://127.0.0.1:9")
    assert run.returncode == 1 and "no Dask scheduler answers" in run.stderr


def test_several_models_in_one_sweep(mlp, resnet, tmp_path):
    out = tmp_path / "both"
    run = ckpt("sweep", "0.6:0.8", "--step", "0.2", "--model", str(mlp), "--model", str(resnet), "-o", str(out),
               *SWEEP)
    assert run.returncode == 0, run.stderr
    labels = [row["label"] for row in json.loads((out / "sweep.json").read_text())["points"]]
    assert labels == [f"{m}/{p}" for m in (mlp.name, resnet.name) for p in ("baseline", "0.8", "0.6")]
    for model in (mlp.name, resnet.name):
        assert (out / model / "sweep.md").is_file() and (out / model / "pareto.png").is_file()
        assert (out / model / "points" / "0.8" / "seq.json").is_file()
    again = ckpt("sweep", "0.6:0.8", "--step", "0.2", "--model", str(mlp), "--model", str(resnet), "-o", str(out),
                 *SWEEP)
    assert again.returncode == 0 and "0 point(s) run, 6 skipped" in again.stdout


def test_losing_the_scheduler_mid_sweep_is_one_line_in_the_log_and_a_rerun_resumes(mlp, tmp_path):
    """The scheduler goes away while points run: one ckpt line (no distributed traceback), the same line in
    sweep.log, exit 1; the finished points are kept and the same command on a new cluster resumes."""
    out = tmp_path / "sweep"
    args = [sys.executable, "-m", "ckpt", "sweep", "0.5:0.9", "--step", "0.2", "--model", str(mlp), "-o", str(out),
            *SWEEP]
    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                           scheduler_port=0)
    sweep = subprocess.Popen([*args, "--scheduler", cluster.scheduler_address], stderr=subprocess.PIPE, text=True)
    for line in sweep.stderr:
        if "solved" in line:                          # points are running: take the cluster away
            break
    cluster.close()
    err = line + sweep.stderr.read()
    assert sweep.wait(timeout=120) == 1
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1 and "lost the Dask scheduler" in lines[0] and "rerun the same command" in lines[0], err
    assert "Traceback" not in err
    assert "lost the Dask scheduler" in (out / "sweep.log").read_text()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      scheduler_port=0) as again:
        rerun = subprocess.run([*args, "--scheduler", again.scheduler_address], capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr
    assert all((out / "points" / label / "point.json").is_file() for label in ("baseline", "0.9", "0.7", "0.5"))
