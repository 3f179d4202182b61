"""Fails to load in the way its model name says (the reliability load-failure tests):
init_raises raises from initialize (with a very long message), init_exits calls
os._exit(4), init_killed sends itself SIGKILL, init_hangs never returns."""

import os
import signal
import sys
import threading


class TritonPythonModel:
    def initialize(self, args):
        name = args["model_name"]
        print(f"{name}: initializing in pid {os.getpid()}", file=sys.stderr, flush=True)
        if name == "init_raises":
            self._check_setting(args)
        if name == "init_exits":
            os._exit(4)
        if name == "init_killed":
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "init_hangs":
            threading.Event().wait()

    def _check_setting(self, args):
        # Long enough that any cut in the error path would show: 20 KiB, then an end marker.
        detail = "x" * 20480
        raise ValueError(f"setting 'threshold' is missing: {detail} END-OF-MESSAGE")

    def execute(self, requests):
        return []
