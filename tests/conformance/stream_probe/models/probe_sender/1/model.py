"""Response-sender corner cases: what reaches the client when outputs are odd arrays, a
Tensor or a numpy array is reused between sends, or many threads share the sender."""

import threading

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def out(array, name="OUT"):
    return pb_utils.InferenceResponse([pb_utils.Tensor(name, array)])


class TritonPythonModel:
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
