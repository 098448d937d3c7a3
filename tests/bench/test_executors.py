"""Executors: the same records whichever runs the plan; interrupted sweeps resume; two
workers finishing the same job leave one record."""

import contextlib
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.core.executors import execute, run_jobs
from bench.spec.plan import plan
from bench.spec.sweep import load_spec, runs
from tests.conftest import sweep_exit


def _ray_token(tmp_path: Path) -> dict[str, str]:
    """The environment of a Ray run whose token lives in ``tmp_path``: Ray 2.59 and later write
    one to ~/.ray/auth_token on a local ``ray.init()`` unless a token is found, and a token
    there turns on token auth for every later ``ray start`` on the user's machine."""
    import secrets

    token = tmp_path / "ray_auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_TOKEN_PATH": str(token)}
    env.pop("RAY_AUTH_MODE", None)
    env.pop("RAY_AUTH_TOKEN", None)
    return env


def _spec(tmp_path, tiny_bert) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(textwrap.dedent(f"""
        [defaults]
        backbone = "{tiny_bert}"
        max_examples = 40
        params = {{ epochs = 1, batch_size = 8 }}
        [[group]]
        method = "finetune"
        suite = "ood"
        params = {{ loss = ["ce", "poe"] }}
        [[group]]
        method = "imp"
        suite = "ood"
        sparsity = [0.5, 0.7]
    """))
    return path


def _scores(out: Path) -> dict[str, dict]:
    """Every record's metrics, timings left out (they vary run to run)."""
    recs = {}
    for p in (out / "records").glob("*.json"):
        r = json.loads(p.read_text())
        recs[p.name] = {k: v for k, v in r["metrics"].items() if not k.startswith("eff/")}
    return recs


def _run(spec: Path, out: Path, executor: str, workers: int = 1) -> None:
    jobs = plan(runs(load_spec(spec)))
    outcomes = run_jobs(jobs, out, executor, workers=workers, cpus_per_job=1, log=lambda m: None)
    assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]
    assert len(outcomes) == len(jobs)


@pytest.fixture(scope="module")
def local_records(tmp_path_factory, tiny_bert):
    tmp = tmp_path_factory.mktemp("local")
    spec = _spec(tmp, tiny_bert)
    _run(spec, tmp / "out", "local")
    return spec, _scores(tmp / "out")


def test_a_process_pool_gives_the_records_of_the_local_executor(local_records, tmp_path):
    spec, expected = local_records
    assert len(expected) == 4  # finetune ce / poe, imp 0.5 / 0.7
    _run(spec, tmp_path / "out", "pool", workers=2)
    assert _scores(tmp_path / "out") == expected


def _execute_in(args):
    job, out = args
    return execute(job, out, 1)


def test_two_workers_finishing_the_same_job_leave_one_record(local_records, tmp_path, tiny_bert):
    spec, _ = local_records
    jobs = plan(runs(load_spec(spec), {"method": ["finetune"]}))
    for job in jobs.values():  # the candidates first, so both evaluations run at once
        if job.kind == "build":
            execute(job, str(tmp_path / "out"), 1)
    evals = [j for j in jobs.values() if j.kind == "evaluate"]
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        outcomes = pool.map(_execute_in, [(j, str(tmp_path / "out")) for j in evals for _ in range(2)])
    assert all(o.ok for o in outcomes)
    files = sorted(p.name for p in (tmp_path / "out" / "records").iterdir())
    assert len(files) == len(evals) == 2 and all(f.endswith(".json") for f in files)  # no temporary left
    for p in (tmp_path / "out" / "records").iterdir():
        json.loads(p.read_text())


def test_killing_a_sweep_and_rerunning_it_finishes_only_the_missing_jobs(local_records, tmp_path):
    spec, expected = local_records
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "bench", "sweep", str(spec), "--out", str(out), "--cpus-per-job", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(list((out / "records").glob("*.json")) if (out / "records").is_dir() else []) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")}
    assert 2 <= len(before) < 4
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert rerun.returncode == sweep_exit(out), rerun.stderr
    after = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")}
    assert set(after) == set(expected) and all(after[k] == v for k, v in before.items())  # old ones untouched
    assert _scores(out) == expected
    head = rerun.stderr.splitlines()[0]  # "[sweep] SPEC: 8 jobs, K to run, ..."
    total, todo = (int(head.split(": ", 1)[1].split(", ")[i].split()[0]) for i in (0, 1))
    assert total == 8 and todo <= 8 - len(before)  # the finished records' jobs are not redone
    assert sum(bool(re.match(r"\[sweep\] \d+/\d+ ", line)) for line in rerun.stderr.splitlines()) == todo


def test_a_ray_cluster_started_as_a_user_would(local_records, tmp_path):
    """`ray start --head` on this machine, then `bench sweep --executor ray
    --ray-address`; the sweep killed mid-way and run again (with `--ray-address auto`, as on a
    head node) gives the local executor's records. (A local Ray instance, no address, runs the
    same tasks: ``test_a_worker_killed_mid_sweep_fails_its_own_job_only[ray]`` starts one.)"""
    pytest.importorskip("ray")
    import socket

    spec, expected = local_records
    ray_cli = str(Path(sys.executable).parent / "ray")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = _ray_token(tmp_path)  # `ray start` asks for a token where one is found: here, always
    start = subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=2",
                            "--include-dashboard=false", "--disable-usage-stats"], env=env, capture_output=True, text=True,
                           timeout=300)
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        out = tmp_path / "out"
        argv = [sys.executable, "-m", "bench", "sweep", str(spec), "--out", str(out), "--executor", "ray",
                "--ray-address", f"127.0.0.1:{port}", "--cpus-per-job", "1", "--workers", "2"]
        if int(__import__("ray").__version__.split(".")[1]) >= 59:  # `ray start` clusters ask for a token
            # Ray retries a refused connection for 20 s before it raises; 2 tries say the same
            refused = subprocess.run(argv, env={**env, "RAY_gcs_server_port_wait_time_s": "2"}, capture_output=True,
                                     text=True, timeout=300)
            said = refused.stderr.strip().splitlines()[-1]
            assert refused.returncode == 2 and "set RAY_AUTH_MODE=token" in said and "--ray-address auto" in said
            env["RAY_AUTH_MODE"] = "token"  # what that one-line error tells the user to do
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 900  # about 1 minute alone; far longer when the cores are shared
        while time.time() < deadline and len(list((out / "records").glob("*.json")) if (out / "records").is_dir() else []) < 1:
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before = len(list((out / "records").glob("*.json")))
        assert 1 <= before < 4
        auto = [*argv[:argv.index("--ray-address") + 1], "auto", *argv[argv.index("--ray-address") + 2:]]
        plain = {k: v for k, v in env.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}  # on the head node `auto` finds the token
        rerun = subprocess.run(auto, env=plain, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == sweep_exit(out), rerun.stderr[-2000:]
        assert _scores(out) == expected
    finally:
        subprocess.run([ray_cli, "stop", "--force"], env=env, capture_output=True, timeout=120)


def test_pool_workers_end_when_their_sweep_is_killed(local_records, tmp_path):
    """A process pool does not pass SIGKILL or SIGTERM on to its workers: each watches its parent."""
    spec, _ = local_records
    proc = subprocess.Popen([sys.executable, "-m", "bench", "sweep", str(spec), "--out", str(tmp_path / "out"),
                             "--executor", "pool", "--workers", "2", "--cpus-per-job", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children: list[int] = []
    deadline = time.time() + 120
    while time.time() < deadline and len(children) < 2:
        listed = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "multiprocessing"], capture_output=True, text=True)
        children = [int(p) for p in listed.stdout.split()]
        time.sleep(0.2)
    assert children, "the pool started no workers"
    time.sleep(2)  # let them pick up jobs
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 30
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() for p in children):
        time.sleep(0.5)
    assert not [p for p in children if Path(f"/proc/{p}").exists()], "pool workers outlived their sweep"


def test_jobs_run_seed_by_seed_and_a_record_before_the_next_build(tmp_path, monkeypatch, run_spec):
    """A long study stopped part-way leaves complete seeds and finished records."""
    from bench.core import executors

    specs = [run_spec(method=m, seed=s, **({"sparsity": 0.5} if m == "imp" else {})) for m in ("finetune", "imp")
             for s in (1, 0)]
    order = []
    monkeypatch.setattr(executors, "execute",
                        lambda job, *a, **k: order.append(job) or executors.Outcome(job.id, True, 0.0, ""))
    run_jobs(plan(specs), tmp_path, log=lambda m: None)
    assert [(j.spec.seed, j.kind, j.spec.method) for j in order] == [
        (s, kind, m) for s in (0, 1) for m in ("finetune", "imp") for kind in ("build", "evaluate")]


def test_an_exception_without_a_message_still_gives_a_one_line_reason():
    from bench.core.executors import _first_line

    assert _first_line(ConnectionError()) == "ConnectionError"
    assert _first_line(RuntimeError("first\nsecond")) == "first"


def _tiny_sweep(tmp_path: Path, tiny_bert: Path, method: str, seeds: list[int]) -> Path:
    """A sweep of ``method`` on the OOD suite with jobs of a fraction of a second each."""
    spec = tmp_path / "spec.toml"
    spec.write_text(textwrap.dedent(f"""
        [defaults]
        backbone = "{tiny_bert}"
        max_examples = 12
        params = {{ epochs = 1, batch_size = 8 }}
        [[group]]
        method = "{method}"
        suite = "ood"
        seed = {seeds}
    """))
    return spec


DOOMED = '''
import os
import signal

import torch.nn.functional as F

from bench.plugin import LossMethod
from bench.registry import METHODS


@METHODS.register("doomed")
class Doomed(LossMethod):
    """Cross-entropy, but the process building seed 1 is killed as the kernel kills one out of memory."""

    def loss(self, logits, y):
        return F.cross_entropy(logits, y)

    def build(self, ctx, p):
        if ctx.seed == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().build(ctx, p)
'''


@pytest.mark.parametrize("executor", ["pool", "ray"])
def test_a_worker_killed_mid_sweep_fails_its_own_job_only(executor, tmp_path, tiny_bert):
    """A killed worker fails its own job only, named with the signal; the others finish, and
    the sweep writes its leaderboard and summary (a stock process pool aborts as a whole)."""
    if executor == "ray":
        pytest.importorskip("ray")
    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "bench_doomed.py").write_text(DOOMED)
    dist = plug / "bench_doomed-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bench-doomed\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[bench.methods]\ndoomed = bench_doomed\n")
    spec = _tiny_sweep(tmp_path, tiny_bert, "doomed", [0, 1, 2])
    out = tmp_path / "out"
    env = {**(_ray_token(tmp_path) if executor == "ray" else os.environ),
           "PYTHONPATH": os.pathsep.join([str(plug), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "bench", "sweep", str(spec), "--out", str(out), "--executor", executor,
                           "--workers", "2", "--cpus-per-job", "1"], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    failed = [line for line in proc.stderr.splitlines() if "FAILED" in line]
    assert len(failed) == 2, failed  # the build of seed 1, and the evaluation that needed it
    assert "build doomed" in failed[0] and "seed 1" in failed[0]
    assert ("killed by SIGKILL" if executor == "pool" else "WorkerCrashedError") in failed[0]
    assert "skipped: needs" in failed[1]
    records = [json.loads(p.read_text()) for p in (out / "records").glob("*.json")]
    assert sorted((r["method"], r["seed"]) for r in records) == [
        ("doomed", 0), ("doomed", 2), ("finetune", 0), ("finetune", 1), ("finetune", 2)]
    assert (out / "LEADERBOARD.md").is_file() and "2 of 12 jobs failed" in proc.stderr


def _pool_workers(sweep: int) -> list[int]:
    """The processes that run a pool sweep's jobs: its workers."""
    found = subprocess.run(["pgrep", "-P", str(sweep), "-f", "spawn_main"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def test_workers_killed_at_random_lose_no_finished_record_and_a_rerun_does_only_the_rest(tmp_path, tiny_bert):
    """80 tiny jobs, pool workers killed at random while they run. A record is written by its
    worker, atomically, whichever executor runs it; how Ray reports a killed worker is
    ``test_a_worker_killed_mid_sweep_fails_its_own_job_only[ray]`` and a killed Ray sweep run
    again is ``test_a_ray_cluster_started_as_a_user_would``."""
    import random

    spec = _tiny_sweep(tmp_path, tiny_bert, "finetune", list(range(40)))
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "bench", "sweep", str(spec), "--out", str(out), "--executor", "pool",
            "--workers", "2", "--cpus-per-job", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rng, kills = random.Random(0), 0
    deadline = time.time() + 300
    while proc.poll() is None and kills < 4 and time.time() < deadline:
        time.sleep(rng.uniform(0.5, 2.0))  # 4 kills in at most 8 s, well inside the sweep
        if pids := _pool_workers(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(rng.choice(pids), signal.SIGKILL)
                kills += 1
    err = proc.communicate(timeout=600)[1]
    lines = [line for line in err.splitlines() if re.match(r"\[sweep\] \d+/80 ", line)]
    assert len(lines) == 80, err[-3000:]  # every job has an outcome: the sweep went on to the end
    died = [line for line in lines if "died" in line]
    assert kills == 4 and died, err[-3000:]
    assert proc.returncode == 2 and "jobs failed" in err and (out / "LEADERBOARD.md").is_file()
    done = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")}
    assert len(done) >= sum(" done" in line and "evaluate" in line for line in lines)  # each finished job's record
    rerun = subprocess.run([*argv[:7], "--cpus-per-job", "1"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == sweep_exit(out), rerun.stderr[-3000:]
    todo = int(rerun.stderr.splitlines()[0].split(", ")[1].split()[0])  # "[sweep] SPEC: 80 jobs, K to run, ..."
    assert 1 <= todo <= 80 - sum(" done" in line for line in lines)
    after = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("*.json")}
    assert len(after) == 40 and all(after[k] == v for k, v in done.items())  # the first run's records untouched
