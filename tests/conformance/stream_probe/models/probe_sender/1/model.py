"""Response-sender corner cases: what reaches the client when outputs are odd arrays, a
Tensor or a numpy array is reused between sends, or many threads share the sender."""

import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def out(array, name="OUT"):
    return pb_utils.InferenceResponse([pb_utils.Tensor(name, array)])


class TritonPythonModel:
    def initialize(self, args):
        self.after_cancel = []

    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            getattr(self, "case_" + mode)(request.get_response_sender())
        return None

    def case_noncontiguous(self, sender):
        sender.send(out(np.arange(10, dtype=np.int32)[::2]))
        sender.send(out(np.arange(6, dtype=np.int32).reshape(2, 3).T.reshape(-1)[::-1]))
        sender.send(flags=FINAL)

    def case_zero_size(self, sender):
        sender.send(out(np.zeros([0], np.int32)))
        sender.send(out(np.zeros([0], np.object_), "BOUT"), flags=FINAL)

    def case_bytes_nul(self, sender):
        sender.send(out(np.array([b"a\x00b", b"\x00", b""], np.object_), "BOUT"), flags=FINAL)

    def case_tensor_reused(self, sender):
        tensor = pb_utils.Tensor("OUT", np.array([7, 8], np.int32))
        sender.send(pb_utils.InferenceResponse([tensor]))
        sender.send(pb_utils.InferenceResponse([tensor]), flags=FINAL)

    def case_array_mutated(self, sender):
        # The original copies the outputs when send() is called: a later change of the
        # array is not seen by the response already sent.
        array = np.array([1, 2, 3], np.int32)
        sender.send(out(array))
        array += 100
        sender.send(out(array))
        array[:] = 0
        sender.send(flags=FINAL)

    def case_threads(self, sender):
        def worker(base):
            for i in range(5):
                sender.send(out(np.array([base + i], np.int32)))

        threads = [threading.Thread(target=worker, args=(k * 100,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sender.send(flags=FINAL)

    def case_outputs_and_final(self, sender):
        sender.send(out(np.array([1], np.int32)), flags=FINAL)

    def case_send_after_cancel(self, sender):
        # Waits (at most 10 s) for the client to cancel, then sends an output and FINAL.
        deadline = time.monotonic() + 10
        while not sender.is_cancelled() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.after_cancel = ["cancelled" if sender.is_cancelled() else "not cancelled"]
        for response, flags in ((out(np.array([1], np.int32)), 0), (None, FINAL)):
            try:
                sender.send(response, flags=flags)
                self.after_cancel.append("sent")
            except Exception as exc:  # noqa: BLE001 - the probe reports any outcome
                self.after_cancel.append(f"{type(exc).__name__}: {exc}")

    def case_report_cancel(self, sender):
        found = np.array([t.encode() for t in self.after_cancel], np.object_)
        sender.send(out(found, "BOUT"), flags=FINAL)
