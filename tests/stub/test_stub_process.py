"""``python -m pybackend.stub`` as a real child process, driven by a Python fake backend:
start-up, loading, auto-complete, finalize, death of either side, fds and signals."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_backend import FakeBackend, started, wait_until, write_model  # noqa: E402

ADD_SUB = textwrap.dedent(
    """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def initialize(self, args):
            self.args = args
            self.config = json.loads(args["model_config"])
            pb_utils.Logger.log_info("initialized " + json.dumps(sorted(args)))

        def execute(self, requests):
            responses = []
            for request in requests:
                a = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
                b = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
                responses.append(pb_utils.InferenceResponse([
                    pb_utils.Tensor("OUTPUT0", a + b),
                    pb_utils.Tensor("OUTPUT1", a - b),
                ]))
            return responses

        def finalize(self):
            pb_utils.Logger.log_info("finalized")
    """
)


def test_add_sub_lifecycle(repo: Path) -> None:
    mf = write_model(repo, "add_sub", ADD_SUB)
    with FakeBackend("add_sub_0_0") as fb:
        version, pid, py, np_version = fb.hello()
        assert pid == fb.proc.pid and py.count(".") == 2 and np_version
        reply = fb.init(mf)
        # initialize's LOG (its args' keys) went out on async before the reply, which counts
        # it: the driver, as the backend, has handled it by the time init returns.
        assert reply.pop("async_seq") >= 1 and len(fb.logs) == 1
        assert reply == {
            "ok": True,
            "error": None,
            "model_config": None,
            "has_is_ready": False,
            "is_async_execute": False,
        }
        a = np.arange(16, dtype=np.float32)
        b = np.full(16, 2, np.float32)
        for arena in (False, True):
            res = fb.execute([{"INPUT0": a, "INPUT1": b}, {"INPUT0": b, "INPUT1": a}], arena=arena)
            first, second = res["items"]
            np.testing.assert_array_equal(first["outputs"]["OUTPUT0"], a + b)
            np.testing.assert_array_equal(first["outputs"]["OUTPUT1"], a - b)
            np.testing.assert_array_equal(second["outputs"]["OUTPUT1"], b - a)
            assert first["release_flags"] == 1 and first["error"] is None
        assert fb.finalize()["error"] is None
        assert fb.proc.returncode == 0
        messages = [m for *_, m in fb.logs]
        keys = json.loads(messages[0].split(" ", 1)[1])
        assert keys == sorted(
            [
                "model_config",
                "model_instance_kind",
                "model_instance_name",
                "model_instance_device_id",
                "model_repository",
                "model_version",
                "model_name",
            ]
        )
        assert messages[-1] == "finalized"
        assert fb.logs[0][2] == str(mf)


def test_auto_complete_phase(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            @staticmethod
            def auto_complete_config(config):
                config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [4]})
                config.set_max_batch_size(8)
                config.set_model_transaction_policy({"decoupled": True})
                return config
        """
    )
    mf = write_model(repo, "ac", src)
    with FakeBackend("ac") as fb:
        fb.hello()
        reply = fb.init(mf, config={"name": "ac", "input": []}, phase="auto_complete")
        assert reply["ok"], reply
        cfg = json.loads(reply["model_config"])
        assert cfg["input"] == [{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}]
        assert cfg["max_batch_size"] == 8
        assert cfg["model_transaction_policy"] == {"decoupled": True}
        assert fb.finalize()["error"] is None


def test_auto_complete_must_return_a_model_config(repo: Path) -> None:
    src = (
        "class TritonPythonModel:\n"
        "    @classmethod\n"
        "    def auto_complete_config(cls, c):\n"
        "        return 1\n"
    )
    mf = write_model(repo, "acbad", src)
    with FakeBackend("acbad") as fb:
        fb.hello()
        reply = fb.init(mf, phase="auto_complete")
        assert reply["ok"] is False
        assert reply["error"] == (
            "auto_complete_config function in model 'acbad' must return a valid "
            "pb.ModelConfig object."
        )
        fb.finalize()


def test_initialize_failure_is_reported_with_traceback(repo: Path) -> None:
    src = (
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        "        raise RuntimeError('no')\n"
    )
    mf = write_model(repo, "initfail", src)
    with FakeBackend() as fb:
        fb.hello()
        reply = fb.init(mf)
        assert reply["ok"] is False
        assert reply["error"].startswith("RuntimeError: no\n\nAt:\n")
        assert f"  {mf}(3): initialize" in reply["error"]
        assert wait_until(
            lambda: any(m.startswith("Failed to initialize Python stub: ") for *_, m in fb.logs)
        )
        fb.finalize()


def test_missing_model_file(repo: Path) -> None:
    with FakeBackend() as fb:
        fb.hello()
        reply = fb.init(repo / "nope" / "1" / "model.py")
        assert reply["ok"] is False
        assert (
            reply["error"] == f"Python model file not found in '{repo / 'nope' / '1' / 'model.py'}'"
        )


def test_relative_imports_and_model_dir(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils
        from . import helper_mod

        class TritonPythonModel:
            def execute(self, requests):
                text = helper_mod.VALUE + "|" + pb_utils.get_model_dir() + "|" + __name__
                out = pb_utils.Tensor("O", np.array([text], dtype=object))
                return [pb_utils.InferenceResponse([out]) for _ in requests]
        """
    )
    mf = write_model(repo, "rel", src)
    (mf.parent / "helper_mod.py").write_text("VALUE = 'sibling'\n")
    with started(mf) as fb:
        (item,) = fb.execute([{"X": np.zeros(1)}])["items"]
        assert item["outputs"]["O"][0].decode() == f"sibling|{mf.parent}|1.model"
        fb.finalize()


def test_finalize_error_is_reported_and_stub_exits(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import threading, time
        class TritonPythonModel:
            def initialize(self, args):
                threading.Thread(target=time.sleep, args=(3600,)).start()  # never joins
            def execute(self, requests):
                return None
            def finalize(self):
                raise KeyError("gone")
        """
    )
    mf = write_model(repo, "fin", src)
    with started(mf) as fb:
        t0 = time.monotonic()
        reply = fb.finalize()
        assert reply["error"].startswith("KeyError: 'gone'")
        assert fb.proc.returncode == 0 and time.monotonic() - t0 < 5


def test_backend_death_makes_the_stub_exit(repo: Path) -> None:
    mf = write_model(repo, "add_sub", ADD_SUB)
    fb = started(mf)
    try:
        fb.sync.sock.close()
        fb.async_.sock.close()
        fb.proc.wait(timeout=10)
        assert fb.proc.returncode == 0
    finally:
        fb.close()


def test_stub_death_is_seen_as_eof(repo: Path) -> None:
    from pybackend.ipc.channel import ChannelClosed

    src = (
        "import os\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        os._exit(3)\n"
    )
    mf = write_model(repo, "dies", src)
    with started(mf) as fb:
        with pytest.raises(ChannelClosed):
            fb.execute([{"X": np.zeros(1)}])
        assert fb.proc.wait(10) == 3


def test_sigint_is_ignored(repo: Path) -> None:
    mf = write_model(repo, "add_sub", ADD_SUB)
    with started(mf) as fb:
        os.kill(fb.proc.pid, signal.SIGINT)
        a = np.ones(2, np.float32)
        assert "items" in fb.execute([{"INPUT0": a, "INPUT1": a}])
        fb.finalize()


def test_inherited_fds_are_closed(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import os
        import numpy as np
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            def initialize(self, args):
                self.fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("F", np.array(self.fds))])
                        for _ in requests]
        """
    )
    mf = write_model(repo, "fds", src)
    extra = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(extra, True)
    try:
        with started(mf) as fb:
            (item,) = fb.execute([{"X": np.zeros(1)}])["items"]
            fds = set(item["outputs"]["F"].tolist())
            assert {3, 4} <= fds
            if extra > 4:
                assert extra not in fds
            fb.finalize()
    finally:
        os.close(extra)


def test_import_errors_carry_only_model_frames(repo: Path) -> None:
    mf = write_model(repo, "syntax", "def broken(:\n")
    with FakeBackend() as fb:
        fb.hello()
        reply = fb.init(mf)
        assert reply["error"] == "SyntaxError: invalid syntax (model.py, line 1)"
    mf = write_model(repo, "nameerr", "x = 1\nundefined_name\n")
    with FakeBackend() as fb:
        fb.hello()
        reply = fb.init(mf)
        assert reply["error"] == (
            f"NameError: name 'undefined_name' is not defined\n\nAt:\n  {mf}(2): <module>\n"
        )


def test_python_logging_records_keep_their_level(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import logging

        class TritonPythonModel:
            def initialize(self, args):
                logging.getLogger("user").warning("careful %d", 1)
                logging.getLogger("user").error("broken")

            def execute(self, requests):
                return None
        """
    )
    mf = write_model(repo, "pylog", src)
    with started(mf) as fb:
        assert wait_until(lambda: len(fb.logs) >= 2)
        (w, wline, wfile, wmsg), (e, _, _, emsg) = fb.logs[:2]
        assert (w, wmsg, e, emsg) == (1, "careful 1", 2, "broken")
        assert (wfile, wline) == (str(mf), 6)
        fb.finalize()


def test_python_based_backend_imports_model_from_the_backend_dir(
    repo: Path, tmp_path: Path
) -> None:
    backend_dir = tmp_path / "backends" / "mybackend"
    backend_dir.mkdir(parents=True)
    (backend_dir / "model.py").write_text(
        textwrap.dedent(
            """
            import numpy as np
            import triton_python_backend_utils as pb_utils

            class TritonPythonModel:
                def execute(self, requests):
                    text = __name__ + "|" + pb_utils.get_model_dir()
                    out = pb_utils.Tensor("O", np.array([text], dtype=object))
                    return [pb_utils.InferenceResponse([out]) for _ in requests]
            """
        )
    )
    version_dir = repo / "uses_backend" / "1"
    version_dir.mkdir(parents=True)
    with started(version_dir / "model.py", runtime_modeldir=str(backend_dir)) as fb:
        (item,) = fb.execute([{"X": np.zeros(1)}])["items"]
        assert item["outputs"]["O"][0].decode() == f"model|{version_dir}"
        fb.finalize()
