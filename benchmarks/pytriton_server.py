"""A PyTriton user's server for the bind() benchmark: one identity callable bound with
``Triton.bind`` and served until SIGINT. ``--impl pytriton`` imports NVIDIA's nvidia-pytriton
(run it with .venv-pytriton's python), ``--impl ours`` the same names from pybackend.pytriton:
the only difference is the import prefix."""

from __future__ import annotations

import argparse
import importlib

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=("ours", "pytriton"), required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--ready-file", required=True, help="written once the model is bound")
    args = parser.parse_args()
    prefix = "pybackend.pytriton" if args.impl == "ours" else "pytriton"
    triton_mod = importlib.import_module(f"{prefix}.triton")
    config_mod = importlib.import_module(f"{prefix}.model_config")
    Tensor, ModelConfig = config_mod.Tensor, config_mod.ModelConfig

    def identity(requests):
        return [{"OUTPUT0": r["INPUT0"]} for r in requests]

    config = triton_mod.TritonConfig(
        http_address="127.0.0.1",
        grpc_address="127.0.0.1",
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
    )
    # PyTriton 0.7 (and ours, with its defaults) guards /v2/models/<m>/stats with an access
    # token; the benchmark reads Triton's backend time there (no effect on the inference path).
    security = triton_mod.TritonSecurityConfig(restricted_endpoints=[])
    with triton_mod.Triton(config=config, security_config=security) as triton:
        triton.bind(
            model_name="identity",
            infer_func=identity,
            inputs=[Tensor(name="INPUT0", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="OUTPUT0", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=64),
        )
        with open(args.ready_file, "w") as f:
            f.write("READY")
        triton.serve()


if __name__ == "__main__":
    main()
