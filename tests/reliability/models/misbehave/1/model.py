"""Misbehaves on command (CMD). Public-API mistakes a model author can make:
  ok, wrong_dtype, wrong_name, wrong_rank, non_contiguous, object_array, bytes_of_ints,
  return_dict, return_strings, return_two, return_none_list, raise
and what only a malicious or broken stub could send, done through pybackend internals
(the RESULT's tensor descriptor is forged for the one response):
  forge_stub_offset, forge_unknown_segment, forge_backend_offset, forge_size,
  forge_bytes, forge_truncated_result, junk_datagram, bogus_free
The backend must answer each with an error (or, for junk on the wire, replace the stub)
and never crash or read outside its memory.
"""

import os
import struct

import numpy as np

import triton_python_backend_utils as pb_utils
from pybackend.ipc import codec
from pybackend.ipc.protocol import Location, MessageKind, Owner
from pybackend.stub import outputs
from pybackend.utils import transport

_original_tensor = outputs.Placer._tensor
_forge = {}  # output name -> function(desc) -> forged desc, used once


def _forging_tensor(self, out, t):
    """Placer._tensor (places ``t`` and encodes it onto ``out``), forging once on demand."""
    forge = _forge.pop(t._name, None)
    if forge is None:
        return _original_tensor(self, out, t)
    codec.put_tensor(out, forge(self.tensor(t)))
    return None


outputs.Placer._tensor = _forging_tensor


def _desc(desc, **changes):
    fields = dict(
        name=desc.name,
        dtype=desc.dtype,
        location=desc.location,
        dims=desc.dims,
        byte_size=desc.byte_size,
        seg=desc.seg,
        offset=desc.offset,
        data=desc.data,
    )
    fields.update(changes)
    return codec.TensorDesc(**fields)


def _ok(out=None):
    pid = pb_utils.Tensor("PID", np.array([os.getpid()], dtype=np.int64))
    tensors = [pid] if out is None else [out, pid]
    return pb_utils.InferenceResponse(tensors)


BIG = np.arange(4096, dtype=np.float32)  # 16 KiB: travels in the stub's arena


class TritonPythonModel:
    def execute(self, requests):
        cmd = pb_utils.get_input_tensor_by_name(requests[0], "CMD").as_numpy()[0].decode()
        out = getattr(self, "do_" + cmd)()
        return out if cmd.startswith("return_") else [out]

    # ---------------------------------------------------------------- public API misuse
    def do_ok(self):
        return _ok(pb_utils.Tensor("OUT", BIG))

    def do_wrong_dtype(self):
        return _ok(pb_utils.Tensor("OUT", np.arange(4, dtype=np.int64)))

    def do_wrong_name(self):
        return _ok(pb_utils.Tensor("NOT_IN_CONFIG", BIG))

    def do_wrong_rank(self):
        return _ok(pb_utils.Tensor("OUT", BIG.reshape(64, 64)))

    def do_non_contiguous(self):
        return _ok(pb_utils.Tensor("OUT", BIG[::2]))

    def do_object_array(self):
        return _ok(pb_utils.Tensor("OUT", np.array([object(), object()], dtype=np.object_)))

    def do_bytes_of_ints(self):
        return _ok(pb_utils.Tensor("TEXT", np.array([1, 2.5, None], dtype=np.object_)))

    def do_return_dict(self):
        return {"OUT": BIG}

    def do_return_strings(self):
        return ["OUT"]

    def do_return_two(self):
        return [_ok(), _ok()]

    def do_return_none_list(self):
        return [None]

    def do_raise(self):
        raise RuntimeError("model code failed on purpose")

    # ---------------------------------------------------------------- a forged RESULT
    def _forged(self, name, forge, tensor=None):
        _forge[name] = forge
        return _ok(tensor if tensor is not None else pb_utils.Tensor(name, BIG))

    def do_forge_stub_offset(self):
        return self._forged("OUT", lambda d: _desc(d, offset=(1 << 40)))

    def do_forge_unknown_segment(self):
        return self._forged("OUT", lambda d: _desc(d, seg=4242))

    def do_forge_backend_offset(self):
        return self._forged(
            "OUT", lambda d: _desc(d, location=Location.BACKEND_ARENA, seg=0, offset=(1 << 40))
        )

    def do_forge_size(self):
        # Shape says 4096 floats; the descriptor claims 1 GiB in the stub's arena.
        return self._forged("OUT", lambda d: _desc(d, byte_size=1 << 30))

    def do_forge_bytes(self):
        # A BYTES output whose first element claims 1 MiB while 3 bytes follow.
        bad = struct.pack("<I", 1 << 20) + b"abc"
        text = pb_utils.Tensor("TEXT", np.array([b"x"], dtype=np.object_))
        forged = lambda d: _desc(  # noqa: E731
            d, location=Location.INLINE, dims=(1,), byte_size=len(bad), data=bad
        )
        return self._forged("TEXT", forged, text)

    def do_forge_truncated_result(self):
        # The RESULT message itself is cut short: the backend cannot decode it.
        real = codec.end_result  # what finishes the stub's RESULT (dispatch.py)

        def truncated(result, async_seq):
            codec.end_result = real
            return real(result, async_seq)[:-7]

        codec.end_result = truncated
        return _ok(pb_utils.Tensor("OUT", BIG[:8]))

    # ---------------------------------------------------------------- junk on the wire
    def do_junk_datagram(self):
        transport.get_transport().state.async_.sock.send(b"\x07\x00\x01")
        return _ok()

    def do_bogus_free(self):
        body = codec.encode_free(Owner.BACKEND, [(77, 1 << 33), (0, 1 << 40)])
        transport.get_transport().state.async_.send(MessageKind.FREE, body)
        return _ok()
