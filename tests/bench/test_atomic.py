"""Writes are atomic: two identical processes on one output directory both finish, and what
they leave is one whole copy of everything, no half files and no temporary names."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.store.atomic import atomic_dir, damage, exclusive


def _slow_build(final: str, tag: str) -> None:
    with atomic_dir(Path(final)) as tmp:
        for i in range(5):
            (tmp / f"part{i}.txt").write_text(tag)
            time.sleep(0.05)


def test_two_builders_of_one_directory_leave_one_whole_copy(tmp_path):
    final = tmp_path / "cache" / "artifact"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_slow_build, args=(str(final), tag)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    tags = {f.read_text() for f in final.iterdir() if f.name != "SHA256SUMS"}
    assert sorted(f.name for f in final.iterdir()) == ["SHA256SUMS"] + [f"part{i}.txt" for i in range(5)] and len(tags) == 1
    assert damage(final) is None  # one builder's files, with that builder's checksums
    assert [p.name for p in final.parent.iterdir()] == ["artifact"]  # no temporary directory left


def _build_once(final: str, log: str, start) -> None:
    """What the masked-LM head and the distilled student do: check, lock, check again, build."""
    target = Path(final)
    start.wait()  # all processes arrive together
    with exclusive(target):
        if not (target / "done").is_file():
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            _slow_build(final, str(os.getpid()))
            (target / "done").touch()


def test_a_one_time_artifact_is_built_by_one_process_while_the_other_waits(tmp_path):
    final, log = tmp_path / "cache" / "head", tmp_path / "builders.log"
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=_build_once, args=(str(final), str(log), start)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert len(log.read_text().split()) == 1  # without the lock each process builds its own
    assert (final / "done").is_file()


def test_a_failed_build_leaves_nothing(tmp_path):
    final = tmp_path / "artifact"
    with pytest.raises(RuntimeError), atomic_dir(final) as tmp:
        (tmp / "half.txt").write_text("x")
        raise RuntimeError("killed")
    assert not final.exists() and list(tmp_path.iterdir()) == []


def test_two_identical_runs_on_one_output_directory(tmp_path, tiny_bert):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "bench", "run", "--method", "imp", "--suite", "ood", "--sparsity", "0.5",
            "--backbone", str(tiny_bert), "--max-examples", "40", "--param", "epochs=1", "--param", "batch_size=8",
            "--out", str(out), "--quiet", "--cpus-per-job", "1"]  # one thread each: two on two cores, not four
    env = {**os.environ, "BENCH_CACHE": os.environ.get("BENCH_CACHE", str(tmp_path / "cache"))}
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    records = sorted((out / "records").glob("*.json"))
    assert len(records) == 2  # imp and its F_bias reference, each once
    for r in records:
        rec = json.loads(r.read_text())
        assert (r.parent / rec["predictions"]).is_file() and (r.parent / rec["artifact"]["dir"] / "candidate.json").is_file()
    leftovers = [p for p in out.rglob("*") if (p.name.startswith(".") or p.name.endswith(".tmp"))
                 and not (p.name.endswith(".lock") and p.stat().st_size == 0)]  # a run's lock stays, empty
    assert not leftovers
    from bench.core.runner import Runner
    from bench.spec.run import resolve

    spec = resolve("imp", "ood", sparsity=0.5, backbone=str(tiny_bert), max_examples=40,
                   params={"epochs": 1, "batch_size": 8})
    cand = Runner(out, progress=False, log=lambda m: None).candidate(spec.candidate())  # loads, whole
    assert cand.sparsity.sparsity == pytest.approx(0.5, abs=1e-6)


def test_the_lock_file_is_never_truncated_nor_followed_through_a_symlink(tmp_path):
    from bench.store.atomic import exclusive

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / ".artifact.lock").symlink_to(victim)
    ran = []
    with exclusive(tmp_path / "artifact"):
        ran.append(True)
    assert ran and victim.read_text() == "keep me"


def test_the_writability_probe_is_safe_when_runs_share_a_folder(tmp_path):
    """Two runs started together on one --out once failed with 'not writable' (a shared probe name)."""
    from concurrent.futures import ThreadPoolExecutor

    from bench.core.batch import writable as _writable

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: _writable(tmp_path), range(4000)))
    assert list(tmp_path.iterdir()) == []


def test_files_and_folders_get_the_users_umask_not_a_temporary_names_modes(tmp_path, monkeypatch):
    """mkstemp and mkdtemp create 0600 and 0700: renamed as they are, a record on a shared output
    folder would be unreadable to everyone else."""
    import stat

    from bench.store import atomic

    for mask, file_mode, dir_mode in ((0o022, 0o644, 0o755), (0o077, 0o600, 0o700), (0o002, 0o664, 0o775)):
        monkeypatch.setattr(atomic, "UMASK", mask)
        out = tmp_path / f"m{mask:o}"
        atomic.write_atomic(out / "record.json", "{}")
        with atomic.atomic_dir(out / "artifact") as d:
            (d / "model.safetensors").write_bytes(b"x")
        atomic.save_atomic(out / "plot.png", lambda p: p.write_bytes(b"png"))
        assert stat.S_IMODE((out / "record.json").stat().st_mode) == file_mode
        assert stat.S_IMODE((out / "plot.png").stat().st_mode) == file_mode
        assert stat.S_IMODE((out / "artifact").stat().st_mode) == dir_mode
        assert stat.S_IMODE((out / "artifact" / "model.safetensors").stat().st_mode) == file_mode


def test_what_a_killed_run_left_is_removed_by_the_next_write_and_a_live_ones_stays(tmp_path):
    import subprocess
    import sys

    from bench.store.atomic import HOST, atomic_dir, write_atomic

    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)  # a process that has exited
    stale = tmp_path / f".artifact.{HOST}-{dead}-k2j3.tmp"
    (stale / "sub").mkdir(parents=True)
    (stale / "sub" / "model.safetensors").write_bytes(b"\0" * 1000)
    half = tmp_path / f".record.json.{HOST}-{dead}-x9.tmp"
    half.write_text("{")
    live = tmp_path / f".other.{HOST}-{os.getppid()}-q1.tmp"  # the test runner's parent: alive
    live.mkdir()
    foreign = tmp_path / f".other.elsewhere-{dead}-q2.tmp"  # another host's: not ours to judge
    foreign.mkdir()
    write_atomic(tmp_path / "new.json", "{}")
    assert not stale.exists() and not half.exists() and live.exists() and foreign.exists()
    stale.mkdir()
    with atomic_dir(tmp_path / "artifact") as d:
        (d / "f").write_text("x")
    assert not stale.exists() and (tmp_path / "artifact" / "f").is_file()


WRITER = """
import sys
import time
from pathlib import Path
from bench.store.records import Record, write_run
out, tag, start = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
rows = [{"set": "test", "uid": f"u{i}", "gold": i % 2, "pred": i % 2, "writer": tag} for i in range(2000)]
time.sleep(max(0.0, start - time.time()))  # both writers begin together
def record_of(predictions, checksum):
    time.sleep(0.3 if tag == "a" else 0.0)  # a's record comes late: without the unit, after b's whole pair
    return Record(run_id="r", method="m", label=tag, params={}, task="t", backbone="b", seed=0, suite="s",
                  sparsity={"target": None}, metrics={}, details={}, method_info={}, predictions=predictions, reference=None,
                  artifact={"key": "k"}, provenance={k: {} for k in ("config", "versions", "git", "data", "device")},
                  predictions_sha256=checksum)  # the least the record schema lets a reader take
write_run(out, "r", rows, record_of)
"""


def test_a_record_and_its_predictions_are_written_as_one_unit_by_racing_writers(tmp_path):
    """Two writers of one run (different rows, as two thread counts give) started together, again
    and again: the record on disk always names the checksum of the predictions on disk, and its
    label is the writer whose rows those are."""
    from bench.store.records import load_record, read_predictions

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    for round_ in range(4):
        out = tmp_path / f"out{round_}"
        start = time.time() + 3.0  # after both have imported what they need
        procs = [subprocess.Popen([sys.executable, str(script), str(out), tag, str(start)]) for tag in ("a", "b")]
        assert [p.wait(timeout=120) for p in procs] == [0, 0]
        rec = load_record(out / "records" / "r.json")
        _, data = read_predictions(out / "records", rec)  # raises if the pair were mixed
        import gzip
        assert f'"writer": "{rec.label}"' in gzip.decompress(data).decode().splitlines()[0]
