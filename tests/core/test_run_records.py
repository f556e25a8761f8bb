"""Run records and trust: a rerun resumes only the run it matches, differences are named, nothing is
lost; untrusted specs import no code; a resumed `collect` writes the episodes an uninterrupted one does."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from wmsuite.runs import RunMismatchError, ensure_writable, open_run
from wmsuite.specs import UntrustedCodeError, check_trust, file_digest, spec_fingerprint, trust_code


def test_open_run_resumes_refuses_and_moves_aside(tmp_path):
    out = tmp_path / "run"
    ident = {"seed": 0, "data": "a" * 64, "cfg": {"lr": 0.1}}
    assert open_run(out, "x", ident, state={"start": 3})["resumed"] is False
    (out / "result.txt").write_text("kept")
    again = open_run(out, "x", ident, state={"start": 99})
    assert again["resumed"] is True and again["state"] == {"start": 3}  # the state of the run's first start
    with pytest.raises(RunMismatchError, match=r"cfg\.lr: now 0\.2, recorded 0\.1.*seed: now 1, recorded 0"):
        open_run(out, "x", {**ident, "seed": 1, "cfg": {"lr": 0.2}})
    with pytest.raises(RunMismatchError, match="data: now content bbbbbbbbbbbb, recorded content aaaaaaaaaaaa"):
        open_run(out, "x", {**ident, "data": "b" * 64})
    assert open_run(out, "x", {**ident, "seed": 1}, force_new=True)["resumed"] is False
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("run.replaced-")]
    assert len(moved) == 1 and (moved[0] / "result.txt").read_text() == "kept"  # nothing is deleted
    assert json.loads((out / "run.json").read_text())["identity"]["seed"] == 1


def test_unrecorded_directories_and_growable_entries(tmp_path):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "episodes.jsonl").write_text("{}\n")
    with pytest.raises(RunMismatchError, match="no run.json"):
        open_run(legacy, "eval", {"seed": 0})
    assert open_run(legacy, "train", {"seed": 0}, adopt=True)["resumed"] is True  # --resume of an older run

    out = tmp_path / "eval"
    open_run(out, "eval", {"seed": 0, "policies": {"a": {"spec": "expert@1"}}}, growable=("policies",))
    open_run(out, "eval", {"seed": 0, "policies": {"b": {"spec": "expert@0"}}}, growable=("policies",))
    assert set(json.loads((out / "run.json").read_text())["identity"]["policies"]) == {"a", "b"}
    with pytest.raises(RunMismatchError, match="policies.a.spec"):
        open_run(out, "eval", {"seed": 0, "policies": {"a": {"spec": "expert@0.5"}}}, growable=("policies",))


def test_records_are_strict_json_and_unwritable_outputs_fail_first(tmp_path):
    open_run(tmp_path / "r", "x", {"figure": float("nan"), "inf": float("inf")})
    text = (tmp_path / "r" / "run.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["identity"] == {"figure": None, "inf": None}
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="not writable"):  # a path under a file: unwritable even for root
        ensure_writable(blocker / "out")
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="not writable"):
            ensure_writable(ro / "out")


def test_untrusted_specs_import_nothing(tmp_path, monkeypatch):
    module = tmp_path / "sneaky_mod.py"
    marker = tmp_path / "imported"
    module.write_text(f"open({str(marker)!r}, 'w').close()\nclass P:\n    def reset(self): pass\n"
                      "    def predict_action_chunk(self, obs): return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for spec in ("sneaky_mod:P", 'os:system{"command": "true"}',
                 'wmsuite.policies.wrappers:ActionOffset{"inner": "sneaky_mod:P", "offset": [0]}'):
        with pytest.raises(UntrustedCodeError, match="--trust-code"):
            check_trust(spec, trusted=False, source="zoo.json")
    with pytest.raises(UntrustedCodeError):  # the user's own spec is trusted, what it nests is not
        check_trust('wmsuite.policies.wrappers:ActionOffset{"inner": "sneaky_mod:P", "offset": [0]}', trusted=True)
    assert not marker.exists() and "sneaky_mod" not in sys.modules
    check_trust('wmsuite.policies.wrappers:ActionOffset{"inner": "assets:policies/x", "offset": [0]}', trusted=False)
    with trust_code(True):
        check_trust("sneaky_mod:P", trusted=False)
    from wmsuite.policy import load_object

    with pytest.raises(ValueError, match="keyword arguments do not fit"):  # checked before the call
        load_object('sneaky_mod:P{"nope": 1}', trusted=True)


def test_fingerprints_follow_content(tmp_path):
    import torch

    from wmsuite.checkpoint import save_checkpoint

    ckpt = tmp_path / "ckpt"
    save_checkpoint(ckpt, {"w": torch.zeros(3)}, {"class": "X"})
    first = spec_fingerprint(str(ckpt))
    assert first == spec_fingerprint(str(tmp_path / "ckpt"))
    save_checkpoint(ckpt, {"w": torch.ones(3)}, {"class": "X"})
    assert spec_fingerprint(str(ckpt)) != first
    nested = "wmsuite.policies.wrappers:ActionOffset" + json.dumps({"inner": str(ckpt), "offset": [0]})
    assert str(ckpt) in spec_fingerprint(nested) and "wmsuite.policies.wrappers:ActionOffset" in spec_fingerprint(nested)
    assert file_digest(ckpt) == spec_fingerprint(str(ckpt))[str(ckpt)]


class NoisyPolicy:
    """A stateless policy that draws from numpy's global RNG: what `episode_rng` must make per-episode."""

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, obs):
        batch = len(obs["agent_pos"])
        return np.random.uniform(-1, 1, size=(batch, 3, 2)).astype(np.float32)  # noqa: NPY002


def _episodes(path):
    from wmsuite.data import load_episodes

    return load_episodes(path)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        np.array_equal(x.actions, y.actions) and np.array_equal(x.state, y.state) and x.meta == y.meta
        and all(np.array_equal(x.obs[c], y.obs[c]) for c in x.obs) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("policy", ["expert", "tests.core.test_run_records:NoisyPolicy"])
def test_interrupted_collection_resumes_to_the_same_episodes(tmp_path, monkeypatch, policy):
    from wmsuite.cli import main
    from wmsuite.data import stream

    base = ["collect", "--policy", policy, "--skill", "0.5", "--episodes", "5", "--image-size", "16"]
    assert main([*base, "--num-envs", "2", "--out", str(tmp_path / "ref.hdf5")]) == 0
    ref = _episodes(tmp_path / "ref.hdf5")

    real_add, added = stream.EpisodeStream.add, []

    def dies_after_two(self, ep):
        if len(added) == 2:
            raise KeyboardInterrupt
        added.append(ep)
        real_add(self, ep)

    out = tmp_path / "b.hdf5"
    monkeypatch.setattr(stream.EpisodeStream, "add", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        main([*base, "--num-envs", "1", "--out", str(out)])
    monkeypatch.setattr(stream.EpisodeStream, "add", real_add)
    real_append = stream.append_episodes

    def dies_after_rename(*args, **kwargs):  # the merge's replace landed; the shards are still there
        real_append(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(stream, "append_episodes", dies_after_rename)
    with pytest.raises(KeyboardInterrupt):
        main([*base, "--num-envs", "1", "--out", str(out)])
    assert (tmp_path / "b.hdf5.parts").is_dir() and len(_episodes(out)) == 5
    monkeypatch.setattr(stream, "append_episodes", real_append)
    assert main([*base, "--num-envs", "1", "--out", str(out)]) == 0
    assert not (tmp_path / "b.hdf5.parts").exists()
    assert _same(_episodes(out), ref)  # no duplicates, and the episodes of the uninterrupted run
    stamp = out.stat().st_mtime_ns
    assert main([*base, "--num-envs", "1", "--out", str(out)]) == 0  # finished (a kill at exit): nothing to do
    assert out.stat().st_mtime_ns == stamp


def test_a_script_of_appended_collections_rerun_adds_nothing(tmp_path):
    """A data script runs several --append collections into one file; rerun after it finished, each
    collection finds its episodes wherever they sit, not only when they are the file's last."""
    from wmsuite.cli import main

    out = tmp_path / "s.hdf5"
    base = ["collect", "--episodes", "2", "--image-size", "16", "--num-envs", "1", "--out", str(out), "--append"]
    script = [[*base, "--skill", "1.0", "--seed", "10"], [*base, "--skill", "0.5", "--seed", "20"]]
    for args in script:
        assert main(args) == 0
    before = _episodes(out)
    for args in script:
        assert main(args) == 0
    assert _same(_episodes(out), before)
    assert main([*base, "--skill", "0.5", "--seed", "30"]) == 0  # another seed: another collection
    assert [ep.meta["seed"] for ep in _episodes(out)] == [10, 11, 22, 23, 34, 35]  # seed + episodes held


def test_a_script_of_appended_collections_resumes_from_the_top(tmp_path, monkeypatch):
    """Killed during its second collection, the script is rerun from its first command: the first
    finds its episodes (beside the second's shards) and does nothing, the second resumes; the file
    ends as an uninterrupted run leaves it."""
    from wmsuite.cli import main
    from wmsuite.data import stream

    def script(out):
        base = ["collect", "--episodes", "3", "--image-size", "16", "--num-envs", "1", "--out", str(out), "--append"]
        return [[*base, "--skill", "1.0", "--seed", "10"], [*base, "--skill", "0.5", "--seed", "20"]]

    for args in script(tmp_path / "ref.hdf5"):
        assert main(args) == 0
    out = tmp_path / "s.hdf5"
    first, second = script(out)
    assert main(first) == 0
    real_add, added = stream.EpisodeStream.add, []

    def dies_after_one(self, ep):
        if added:
            raise KeyboardInterrupt
        added.append(ep)
        real_add(self, ep)

    monkeypatch.setattr(stream.EpisodeStream, "add", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        main(second)
    monkeypatch.setattr(stream.EpisodeStream, "add", real_add)
    assert main(first) == 0 and (tmp_path / "s.hdf5.parts").is_dir() and len(_episodes(out)) == 3
    assert main(second) == 0 and not (tmp_path / "s.hdf5.parts").exists()
    assert _same(_episodes(out), _episodes(tmp_path / "ref.hdf5"))


def test_leftover_shards_of_another_collection_are_refused(tmp_path, capsys, monkeypatch):
    from wmsuite.cli import main
    from wmsuite.data import stream

    monkeypatch.delenv("WMSUITE_DEBUG", raising=False)
    base = ["collect", "--episodes", "4", "--image-size", "16", "--num-envs", "1", "--out", str(tmp_path / "d.hdf5")]
    real_add = stream.EpisodeStream.add

    def dies_after_one(self, ep):
        real_add(self, ep)
        raise KeyboardInterrupt

    monkeypatch.setattr(stream.EpisodeStream, "add", dies_after_one)
    with pytest.raises(KeyboardInterrupt):
        main([*base, "--skill", "0.5"])
    monkeypatch.setattr(stream.EpisodeStream, "add", real_add)
    capsys.readouterr()
    assert main([*base, "--skill", "1.0", "--seed", "3"]) == 2
    err = capsys.readouterr().err
    assert "policy: now expert@1, recorded expert@0.5" in err and "seed: now 3, recorded 0" in err
    assert not (tmp_path / "d.hdf5").exists()
    assert main([*base, "--skill", "1.0", "--seed", "3", "--force-new"]) == 0
    eps = _episodes(tmp_path / "d.hdf5")
    assert [ep.meta["seed"] for ep in eps] == [3, 4, 5, 6] and {ep.meta["policy_id"] for ep in eps} == {"expert@1"}


def test_a_checkpoint_replace_cut_between_its_renames_is_undone(tmp_path):
    import torch

    from wmsuite.checkpoint import is_checkpoint, load_checkpoint, save_checkpoint

    ckpt = tmp_path / "latest"
    save_checkpoint(ckpt, {"w": torch.zeros(2)}, {"class": "X"})
    ckpt.rename(tmp_path / ".latest.old")  # the state a kill leaves between the two renames of a replace
    assert not ckpt.exists() and is_checkpoint(ckpt)  # put back by the reader
    assert torch.equal(load_checkpoint(ckpt)[0]["w"], torch.zeros(2))


def test_a_calibrator_beside_a_model_does_not_change_its_digest(tmp_path):
    from wmsuite.specs import file_digest

    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config.json").write_text("{}")
    before = file_digest(tmp_path)
    (tmp_path / "calibration.json").write_text('{"kind": "log_normal_calibrator"}')
    assert file_digest(tmp_path) == before  # refitting the trust calibrator keeps the model's runs
    (tmp_path / "README.md").write_text("# model card: figures measured with this model")
    assert file_digest(tmp_path) == before  # so does writing its model card
    (tmp_path / "config.json").write_text('{"changed": 1}')
    assert file_digest(tmp_path) != before
