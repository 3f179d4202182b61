"""The OpenAI endpoint's connections to tritonserver (pybackend/openai_api/client_pool.py):
requests one after the other share one gRPC connection instead of opening one each; when
tritonserver goes away the requests in the meantime are 503s and, once it is back on its
port, the endpoint serves again without a restart of its own."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Set, Tuple

import pytest

openai = pytest.importorskip("openai")

from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402

MODELS = Path(__file__).parent / "openai_models"
# /proc/net/tcp's state of a listening socket: every other row to the port is a connection.
LISTEN = "0A"


@pytest.fixture()
def repository(tmp_path: Path) -> Path:
    for name in ("echo_llm", "chat_llm", "embed_plain"):
        shutil.copytree(MODELS / name, tmp_path / name)
    return tmp_path


def connections_to(port: int) -> Set[Tuple[str, str]]:
    """The (local, remote) addresses of this machine's sockets connected to ``port`` from
    the client's side, whatever their state (a closed connection stays in TIME_WAIT for a
    minute on the side that closed it). A set, so a test compares which ones are new: an
    earlier server's rows may expire meanwhile."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            fields = row.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] != LISTEN:
                found.add((fields[1], fields[2]))
    return found


def sdk(server: OpenAIServer) -> Any:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=30)


def test_requests_one_after_the_other_share_one_connection(
    repository: Path, backend_kind: str
) -> None:
    with TritonServer(repository, backend=backend_kind) as triton:
        port = triton.grpc_port
        before = connections_to(port)
        with OpenAIServer(triton.grpc_url, timeout=30) as endpoint:
            client = sdk(endpoint)
            try:
                for i in range(10):
                    whole = client.completions.create(model="echo_llm", prompt=f"a b {i}")
                    assert whole.choices[0].text == f"{i} b a"
                    pieces = client.completions.create(
                        model="echo_llm", prompt=f"c {i}", stream=True
                    )
                    assert [c.choices[0].text for c in pieces] == [f"{i}", " c", ""]
                    single = client.chat.completions.create(
                        model="chat_llm", messages=[{"role": "user", "content": f"d {i}"}]
                    )
                    assert single.choices[0].message.content.startswith(f"roles=user last=d {i}")
                    vectors = client.embeddings.create(model="embed_plain", input=[f"e {i}"])
                    assert len(vectors.data) == 1
                # 40 requests, each of which used to open one connection (an embeddings
                # request two): one connection now, kept open between them.
                assert len(connections_to(port) - before) == 1
            finally:
                client.close()


def test_the_endpoint_serves_again_once_tritonserver_is_back(
    repository: Path, backend_kind: str
) -> None:
    first = TritonServer(repository, backend=backend_kind)
    with first:
        ports = {"http_port": first.http_port, "grpc_port": first.grpc_port}
        ports["metrics_port"] = first.metrics_port
        endpoint = OpenAIServer(first.grpc_url, timeout=30).start()
        client = sdk(endpoint)
        try:
            answer = client.completions.create(model="echo_llm", prompt="x y")
            assert answer.choices[0].text == "y x"
            first.stop()  # the kept client's connection goes with it
            with pytest.raises(openai.InternalServerError) as gone:
                client.completions.create(model="echo_llm", prompt="x y")
            assert gone.value.status_code == 503
            assert endpoint.upstream.clients.idle() == 0  # none kept on a dead connection
            with TritonServer(repository, backend=backend_kind, **ports):
                for prompt in ("p q", "r s"):
                    answer = client.completions.create(model="echo_llm", prompt=prompt)
                    assert answer.choices[0].text == " ".join(reversed(prompt.split()))
            # Gone and back with no request in between: the kept client's first call
            # reconnects.
            with TritonServer(repository, backend=backend_kind, **ports):
                answer = client.completions.create(model="echo_llm", prompt="u v")
                assert answer.choices[0].text == "v u"
        finally:
            client.close()
            endpoint.close()
