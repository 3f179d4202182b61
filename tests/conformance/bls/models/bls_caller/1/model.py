import json
import os
import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def outputs_of(response):
    """{name: list} of a BLS response's outputs (BYTES decoded)."""
    found = {}
    for t in response.output_tensors():
        a = t.as_numpy()
        if a.dtype == np.object_:
            found[t.name()] = [v.decode() for v in a.reshape(-1)]
        else:
            found[t.name()] = a.tolist()
    return found


def report(response):
    if response.has_error():
        err = response.error()
        return {"error": err.message(), "code": int(err.code())}
    found = {"outputs": outputs_of(response)}
    if hasattr(response, "parameters"):  # the original 24.10 lacks it
        found["parameters"] = json.loads(response.parameters())
    return found


def shared_mapped_bytes():
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            if "memfd:" in line or "/dev/shm/" in line:
                start, end = line.split()[0].split("-")
                total += int(end, 16) - int(start, 16)
    return total


def identity_request(x, **kwargs):
    kwargs.setdefault("requested_output_names", ["OUTPUT0", "OUTPUT1", "PARAMS", "REQUEST_INFO"])
    return pb_utils.InferenceRequest(
        model_name=kwargs.pop("model_name", "bls_identity"),
        inputs=[pb_utils.Tensor("INPUT0", x)],
        **kwargs,
    )


def report_from_a_thread(req):
    """report() of a blocking exec() made by a thread of the model (not the one in execute)."""
    box = []
    t = threading.Thread(target=lambda: box.append(report(req.exec())))
    t.start()
    t.join(60)
    return box[0] if box else "no answer"


def stream_request(count, delay_ms=0):
    return pb_utils.InferenceRequest(
        model_name="bls_stream",
        inputs=[
            pb_utils.Tensor("COUNT", np.array([count], np.int32)),
            pb_utils.Tensor("DELAY_MS", np.array([delay_ms], np.int32)),
        ],
        requested_output_names=["OUT"],
    )


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            result = getattr(self, "mode_" + mode)(x, request)
            out = np.array([json.dumps(result).encode()], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)]))
        return responses

    def mode_sync(self, x, request):
        return report(identity_request(x).exec())

    def mode_request_fields(self, x, request):
        req = identity_request(
            x,
            request_id="bls-42",
            correlation_id=7,
            flags=0,
            timeout=5_000_000,
            parameters={"text": "hello", "number": 3, "flag": True},
            preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0),
        )
        return report(req.exec())

    def mode_traced(self, x, request):
        # trace=request.trace(): the BLS request is traced as a child of this request.
        req = identity_request(x, requested_output_names=["OUTPUT0"], trace=request.trace())
        return report(req.exec())

    def mode_prefer_gpu(self, x, request):
        memory = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 0)
        r = identity_request(x, requested_output_names=["OUTPUT0"], preferred_memory=memory).exec()
        if r.has_error():
            return report(r)
        t = pb_utils.get_output_tensor_by_name(r, "OUTPUT0")
        return {"is_cpu": t.is_cpu(), "OUTPUT0": t.as_numpy().tolist()}

    def mode_big_parameters(self, x, request):
        # BLS_EXEC bodies larger than ours' sync lane slot (64 KiB) and than an inline
        # message (128 KiB); the answer (the parameters echoed) is as big.
        lengths = []
        for n in (70_000, 200_000):
            r = identity_request(x, parameters={"blob": "x" * n}, requested_output_names=["PARAMS"])
            params = pb_utils.get_output_tensor_by_name(r.exec(), "PARAMS").as_numpy()[0]
            lengths.append(len(json.loads(params)["blob"]))
        return {"lengths": lengths}

    def mode_timeout_log(self, x, request):
        # qa python_models/bls test_timeout: an 11 s timeout (µs) on a blocking call, one from
        # another thread and a decoupled one; the callee logs request.timeout() of each
        # (its dims are [batch, -1]).
        found = {}
        for how, timeout in (("blocking", 11000000000), ("thread", 12000000000)):
            req = identity_request(
                x[None, :],
                model_name="bls_queue_timeout",
                requested_output_names=["OUTPUT0"],
                timeout=timeout,
            )
            if how == "thread":
                found[how] = report_from_a_thread(req)
            else:
                found[how] = report(req.exec())
        req = identity_request(
            x[None, :],
            model_name="bls_queue_timeout",
            requested_output_names=["OUTPUT0"],
            timeout=13000000000,
        )
        found["decoupled"] = [report(r) for r in req.exec(decoupled=True)]
        return found

    def mode_timeout_expired(self, x, request):
        # qa python_models/bls test_timeout: 5 µs cannot cover the queue of a callee whose
        # policy rejects expired requests.
        found = {}
        for how in ("blocking", "decoupled", "blocking_thread"):
            big = np.random.randn(1, 1024 * 1024).astype(np.float32)
            req = pb_utils.InferenceRequest(
                model_name="bls_queue_timeout",
                inputs=[pb_utils.Tensor("INPUT0", big)],
                requested_output_names=["OUTPUT0"],
                timeout=5,
            )
            if how == "decoupled":
                found[how] = report(next(req.exec(decoupled=True)))
            elif how == "blocking_thread":
                found[how] = report_from_a_thread(req)
            else:
                found[how] = report(req.exec())
        return found

    def mode_string_correlation_id(self, x, request):
        return report(identity_request(x, correlation_id="session-9").exec())

    def mode_requested_subset(self, x, request):
        return report(identity_request(x, requested_output_names=["OUTPUT1"]).exec())

    def mode_input_passthrough(self, x, request):
        # The caller's own input tensor goes to the callee as it is.
        tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
        req = pb_utils.InferenceRequest(
            model_name="bls_identity", inputs=[tensor], requested_output_names=["OUTPUT0"]
        )
        response = req.exec()
        if response.has_error():
            return report(response)
        y = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
        return {"sum": float(y.sum(dtype=np.float64)), "size": int(y.size)}

    def mode_missing_model(self, x, request):
        return report(identity_request(x, model_name="no_such_model").exec())

    def mode_error_response(self, x, request):
        req = pb_utils.InferenceRequest(
            model_name="bls_error",
            inputs=[pb_utils.Tensor("INPUT0", x)],
            requested_output_names=["OUTPUT0"],
        )
        return report(req.exec())

    def mode_bad_input(self, x, request):
        req = pb_utils.InferenceRequest(
            model_name="bls_identity",
            inputs=[pb_utils.Tensor("WRONG", x)],
            requested_output_names=["OUTPUT0"],
        )
        return report(req.exec())

    def mode_decoupled_without_flag(self, x, request):
        return report(stream_request(2).exec())

    def mode_stream(self, x, request):
        count = int(x[0])
        reports = [report(r) for r in stream_request(count).exec(decoupled=True)]
        return {"responses": reports}

    def mode_stream_replay(self, x, request):
        it = stream_request(2).exec(decoupled=True)
        first = [outputs_of(r) for r in it]
        second = [outputs_of(r) for r in it]
        return {"first": first, "second": second}

    def mode_stream_final(self, x, request):
        # A callee whose last response carries the FINAL flag (qa async_execute_decouple).
        found = {}
        for count in (1, 3, 0):
            req = pb_utils.InferenceRequest(
                model_name="bls_stream_final",
                inputs=[pb_utils.Tensor("COUNT", np.array([count], np.int32))],
                requested_output_names=["OUT"],
            )
            it = req.exec(decoupled=True)
            found[str(count)] = [[t.as_numpy().tolist() for t in r.output_tensors()] for r in it]
        # decoupled=True to a model that is not (qa bls test_zero_length_io): its one response.
        it = identity_request(x, requested_output_names=["OUTPUT0"]).exec(decoupled=True)
        found["identity"] = [outputs_of(r) for r in it]
        return found

    def mode_iterator_protocol(self, x, request):
        # qa python_models/bls test_response_iterator: 4 responses and an empty final one,
        # consumed with next(), for-loops, a break, and next() after the end.
        def values(iterable):
            return [outputs_of(r).get("OUT", [None])[0] for r in iterable]

        def after_end(it):
            try:
                next(it)
            except StopIteration:
                return "stop"
            return "more"

        it = stream_request(4).exec(decoupled=True)
        steps = {"next": values([next(it)]), "rest": values(it), "after_rest": after_end(it)}
        steps["replays"] = [values(it) for _ in range(3)]
        partial = []
        for r in it:
            partial.append(outputs_of(r).get("OUT", [None])[0])
            if len(partial) == 2:
                break
        steps["before_break"] = partial
        steps["next_after_break"] = values([next(it)])
        steps["loop_after_break"] = values(it)
        steps["after_loop"] = after_end(it)
        dropped = stream_request(4).exec(decoupled=True)
        steps["dropped_first"] = values([next(dropped)])
        del dropped
        return steps

    def mode_stream_cancel(self, x, request):
        it = stream_request(100, delay_ms=20).exec(decoupled=True)
        seen = []
        for r in it:
            seen.append(outputs_of(r).get("OUT", [None])[0])
            if len(seen) == 2:
                it.cancel()
        return {"seen": seen}

    def mode_sync_to_decoupled_stream_error(self, x, request):
        # A decoupled call to a model that does not exist: the error comes as a response.
        req = pb_utils.InferenceRequest(
            model_name="no_such_model",
            inputs=[pb_utils.Tensor("COUNT", np.array([1], np.int32))],
            requested_output_names=["OUT"],
        )
        return {"responses": [report(r) for r in req.exec(decoupled=True)]}

    def mode_ensemble(self, x, request):
        req = pb_utils.InferenceRequest(
            model_name="bls_ensemble",
            inputs=[pb_utils.Tensor("ENS_IN", x)],
            requested_output_names=["ENS_OUT"],
        )
        return report(req.exec())

    def mode_bytes(self, x, request):
        # BYTES outputs of the callee come back as object arrays of bytes.
        response = identity_request(x, requested_output_names=["PARAMS"]).exec()
        t = pb_utils.get_output_tensor_by_name(response, "PARAMS").as_numpy()
        return {"dtype": str(t.dtype), "shape": list(t.shape), "type": type(t[0]).__name__}

    def mode_threads(self, x, request):
        results = [None] * 6

        def work(i):
            y = (x + i).astype(np.float32)
            r = identity_request(y, requested_output_names=["OUTPUT0"]).exec()
            results[i] = pb_utils.get_output_tensor_by_name(r, "OUTPUT0").as_numpy().tolist()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(results))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return {"results": results}

    def mode_many(self, x, request):
        total = 0.0
        for _ in range(200):
            r = identity_request(x, requested_output_names=["OUTPUT1"]).exec()
            total += float(pb_utils.get_output_tensor_by_name(r, "OUTPUT1").as_numpy().sum())
        return {"total": total}

    def mode_response_parameters(self, x, request):
        return report(
            identity_request(x, model_name="bls_params", requested_output_names=["OUTPUT0"]).exec()
        )

    def mode_large(self, x, request):
        # 1 MiB each way: inputs and outputs travel through shared memory, not inline.
        big = np.arange(262144, dtype=np.float32) + float(x[0])
        for _ in range(5):
            r = identity_request(big, requested_output_names=["OUTPUT1"]).exec()
            y = pb_utils.get_output_tensor_by_name(r, "OUTPUT1").as_numpy()
            if not np.array_equal(y, big * 2):
                return {"equal": False}
        return {"equal": True, "size": int(y.size)}

    def mode_shared_memory_growth(self, x, request):
        # Mapped shared memory after 20 and after 100 large calls: no growth means the
        # blocks of inputs and outputs are returned.
        big = np.ones(262144, np.float32)
        sizes = []
        for rounds in (20, 80):
            for _ in range(rounds):
                r = identity_request(big, requested_output_names=["OUTPUT0"]).exec()
                del r
            time.sleep(2.5)  # empty segments are unmapped after a second of idleness
            sizes.append(shared_mapped_bytes())
        return {"sizes": sizes}

    def mode_crashing_callee(self, x, request):
        return report(
            identity_request(x, model_name="bls_crash", requested_output_names=["OUTPUT0"]).exec()
        )

    def mode_die_during_stream(self, x, request):
        # The caller's own stub dies while a streaming call is in flight.
        it = stream_request(100, delay_ms=20).exec(decoupled=True)
        next(it)
        os._exit(4)

    def mode_die_during_sync_call(self, x, request):
        # The caller's own stub dies while a blocking call (on the sync channel, in ours)
        # waits for a 50 ms callee.
        threading.Timer(0.02, os._exit, args=(5,)).start()
        req = pb_utils.InferenceRequest(
            model_name="bls_slow",
            inputs=[pb_utils.Tensor("INPUT0", x)],
            requested_output_names=["OUTPUT0"],
        )
        return report(req.exec())

    def mode_drop_unfinished_iterator(self, x, request):
        # Dropping a ResponseIterator before the stream ends must not block; the responses
        # still coming are discarded and the call is forgotten once the final one arrives.
        it = stream_request(5, delay_ms=200).exec(decoupled=True)
        first = outputs_of(next(it))
        started = time.monotonic()
        del it
        dropped_in = time.monotonic() - started
        pending = None
        try:  # ours only: the stub's table of calls in flight empties
            from pybackend.utils import transport

            current = transport.get_transport()
            # A shared process routes each thread to its instance's transport.
            current = current.current() if hasattr(current, "current") else current
            calls = current.bls._calls
            deadline = time.monotonic() + 10
            while calls and time.monotonic() < deadline:
                time.sleep(0.05)
            pending = len(calls)
        except (ImportError, AttributeError):
            pass
        return {"first": first, "dropped_in_s": dropped_in, "pending": pending}

    def mode_model_version(self, x, request):
        good = report(
            identity_request(x, model_version=1, requested_output_names=["OUTPUT0"]).exec()
        )
        bad = report(
            identity_request(x, model_version=9, requested_output_names=["OUTPUT0"]).exec()
        )
        return {"good": good, "bad": bad}
