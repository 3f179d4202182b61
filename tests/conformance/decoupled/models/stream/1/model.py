import gc
import threading
import time
import weakref

import numpy as np

import triton_python_backend_utils as pb_utils


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


def msg(text):
    array = np.array([text.encode()], dtype=object)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", array)])


def attempt(call, *args, **kwargs):
    """'' when the call succeeds, else '<ExceptionType>:<message>'."""
    try:
        call(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return ""


class TritonPythonModel:
    def initialize(self, args):
        # What cannot travel in a closed stream is kept here; mode "report:<key>" returns it.
        self.reports = {}
        self.dropped = None
        self.threads = []

    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            if mode == "return_value":
                return [out(0) for _ in requests]
            if mode == "raise_after_send":
                request.get_response_sender().send(out(0))
                raise ValueError("boom after one response")
            if mode == "never_send":
                continue  # the request (and its sender) is dropped when execute returns
            if mode == "drop_in_thread":
                thread = threading.Thread(target=self.drop_in_thread, args=(request,))
                thread.start()
                thread.join()
                continue
            sender = request.get_response_sender()
            if mode == "inline":
                for i in range(count):
                    sender.send(out(i))
                sender.send(flags=final)
            elif mode == "final_with_last":
                for i in range(count):
                    sender.send(out(i), flags=final if i == count - 1 else 0)
            elif mode == "final_only":
                sender.send(flags=final)
            elif mode == "thread":
                thread = threading.Thread(target=self.late_sends, args=(sender, count))
                thread.start()
                self.threads.append(thread)
            elif mode == "threads_interleaved":
                # Several threads send on the same sender; a lock orders the FINAL last.
                self.interleaved(sender, count)
            elif mode == "send_after_final":
                sender.send(out(0), flags=final)
                self.reports["after_final_response"] = attempt(sender.send, out(1))
                self.reports["after_final_flag"] = attempt(sender.send, None, final)
            elif mode == "bad_flags":
                self.reports["bad_flag"] = attempt(sender.send, out(0), 4)
                self.reports["no_response"] = attempt(sender.send, None, 0)
                sender.send(out(0), flags=final)
            elif mode == "error_response":
                error = pb_utils.TritonError("bad token", pb_utils.TritonError.INVALID_ARG)
                sender.send(out(0))
                sender.send(pb_utils.InferenceResponse(error=error), flags=final)
            elif mode.startswith("report:"):
                sender.send(msg(self.reports.get(mode[len("report:") :], "<none>")), flags=final)
            elif mode == "freed":
                gc.collect()
                ref = self.dropped
                state = "none" if ref is None else ("alive" if ref() is not None else "freed")
                sender.send(msg(state), flags=final)
            else:
                sender.send(msg(f"unknown mode {mode}"), flags=final)
        return None

    def late_sends(self, sender, count):
        time.sleep(0.05)  # execute has returned by now
        for i in range(count):
            sender.send(out(i))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def interleaved(self, sender, count):
        def send_range(start):
            for i in range(start, count, 2):
                sender.send(out(i))

        workers = [threading.Thread(target=send_range, args=(s,)) for s in (0, 1)]
        for w in workers:
            w.start()

        def finish():
            for w in workers:
                w.join()
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

        threading.Thread(target=finish).start()

    def drop_in_thread(self, request):
        # The sender is handed to this thread, sends once and is dropped without FINAL.
        sender = request.get_response_sender()
        sender.send(out(0))
        self.dropped = weakref.ref(sender)
