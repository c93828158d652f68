"""shoal.mosec's Server as Mosec's: what it checks, and the stages it gives Shoal's front."""

import pytest

from shoal.mosec import Runtime, Server, SSEWorker, Worker


class Pre(Worker):
    def forward(self, data):
        return data


class Batched(Worker):
    example = [1, 2]

    def forward(self, data):
        return data


class Events(SSEWorker):
    def forward(self, data):
        return data


def test_reserved_routes_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="'/metrics' is reserved"):
        Server().append_worker(Pre, route="/metrics")
    with pytest.raises(ValueError):
        Server().append_worker(Pre, num=0)
    with pytest.raises(ValueError):
        Server().append_worker(Pre, start_method="forkserver")
    with pytest.raises(ValueError, match="env has 1 entries for num 2"):
        Server().append_worker(Pre, num=2, env=[{"A": "1"}])
    with pytest.raises(TypeError):
        Runtime(dict)


def test_the_stages_given_to_the_front():
    server = Server()
    server.append_worker(Pre, num=2, env=[{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}])
    server.append_worker(Batched, max_batch_size=8, max_wait_time=20, timeout=1.5)
    server.append_worker(Events, route="/sse")
    stages = server._stages("/srv/app.py", 3000)
    assert [s["target"] for s in stages] == ["/srv/app.py:Pre", "/srv/app.py:Batched", "/srv/app.py:Events"]
    assert stages[0]["env"][1] == {"CUDA_VISIBLE_DEVICES": "1"} and stages[0]["maxWaitMs"] == 10 and stages[0]["timeoutMs"] == 3000
    assert (stages[1]["maxBatchSize"], stages[1]["maxWaitMs"], stages[1]["timeoutMs"]) == (8, 20, 1500)
    assert stages[2]["streaming"] is True and stages[2]["route"] == ["/sse"]


def test_a_runtime_in_two_routes_is_one_stage():
    shared = Runtime(Batched, max_batch_size=4)
    server = Server()
    server.register_runtime({"/a": [Runtime(Pre), shared], "/b": [shared]})
    stages = server._stages("/srv/app.py", 3000)
    assert [(s["target"], s["route"]) for s in stages] == [("/srv/app.py:Pre", ["/a"]), ("/srv/app.py:Batched", ["/a", "/b"])]
    with pytest.raises(RuntimeError):
        server.register_runtime({"/c": [Runtime(Pre)]})


def test_examples_in_forwards_shape():
    worker = Batched()
    worker.max_batch_size = 8
    assert worker.examples == [1, 2]
    worker.max_batch_size = 1
    assert worker.examples == [[1, 2]]
    assert Pre().examples == []


def test_an_error_made_of_an_exception_says_its_text():
    from shoal.errors import to_wire
    from shoal.mosec import ValidationError

    assert to_wire(ValidationError(KeyError("x"))) == {"code": "VALIDATION", "message": "'x'"}


def test_shared_runtimes_are_given_in_an_order_that_keeps_every_route():
    pre, typed, shared, post = Runtime(Pre), Runtime(Pre), Runtime(Batched, max_batch_size=4), Runtime(Pre)
    server = Server()
    # Shoal takes a route's stages in the order given: `pre` must come before the shared stage.
    server.register_runtime({"/v1": [typed, shared, post], "/raw": [pre, shared]})
    assert [s["route"] for s in server._stages("/srv/app.py", 3000)] == [["/v1"], ["/raw"], ["/v1", "/raw"], ["/v1"]]
    crossed = Server()
    crossed.register_runtime({"/a": [pre, shared], "/b": [shared, pre]})
    with pytest.raises(ValueError, match="contradict"):
        crossed._stages("/srv/app.py", 3000)


def test_the_mixins_decode_and_encode_as_mosecs():
    numpy = pytest.importorskip("numpy")
    msgspec = pytest.importorskip("msgspec")
    from typing import List

    from shoal.mosec.errors import ValidationError
    from shoal.mosec.mixin import NumBinIPCMixin, TypedMsgPackMixin

    class Item(msgspec.Struct):
        name: str
        data: bytes

    class Typed(TypedMsgPackMixin):
        def forward(self, data: List[Item]) -> List[int]:
            return [len(item.data) for item in data]

    typed = Typed()
    typed.max_batch_size = 4
    item = typed.deserialize(msgspec.msgpack.encode({"name": "a", "data": b"xyz"}))
    assert item == Item("a", b"xyz")
    with pytest.raises(ValidationError, match="missing required field `data`"):
        typed.deserialize(msgspec.msgpack.encode({"name": "a"}))
    # Unbatched, the annotation is the item's own: a List[Item] is a list.
    with pytest.raises(ValidationError, match="Expected `array`, got `object`"):
        Typed().deserialize(msgspec.msgpack.encode({"name": "a", "data": b""}))
    assert msgspec.msgpack.decode(typed.serialize([3])) == [3]

    class Arrays(NumBinIPCMixin, Worker):
        pass

    arrays = Arrays()
    sent = numpy.arange(6, dtype=numpy.float64).reshape(2, 3) / 7
    back = arrays.deserialize_ipc(arrays.serialize_ipc(sent))
    assert back.dtype == sent.dtype and back.tobytes() == sent.tobytes()


def test_the_openapi_document_describes_the_typed_ends_only():
    msgspec = pytest.importorskip("msgspec")
    from typing import List

    from shoal.mosec import openapi
    from shoal.mosec.mixin import TypedMsgPackMixin

    class Request(msgspec.Struct):
        bin: bytes

    class TypedPre(TypedMsgPackMixin):
        def forward(self, data: Request) -> bytes:
            return data.bin

    class UntypedLast(TypedMsgPackMixin):
        def forward(self, data):
            return data

    class TypedLast(TypedMsgPackMixin):
        def forward(self, data: List[bytes]) -> List[int]:
            return [len(b) for b in data]

    # Mosec's four pairs of ends (test_openapi_service), each end described or not on its own.
    routes = {}
    for pre in (TypedPre, Pre):
        for last in (TypedLast, UntypedLast):
            routes[f"/{pre.__name__}/{last.__name__}"] = [Runtime(pre), Runtime(last, max_batch_size=8)]
    spec = openapi.document(routes, "0")
    for path in routes:
        operation = spec["paths"][path]["post"]
        if "/TypedPre/" in path:
            assert operation["requestBody"]["content"] == {"application/msgpack": {"schema": {"$ref": "#/components/schemas/Request"}}}
        else:
            assert "requestBody" not in operation
        if path.endswith("/TypedLast"):
            assert operation["responses"]["200"]["content"] == {"application/msgpack": {"schema": {"type": "integer"}}}
        else:
            assert "content" not in operation["responses"]["200"]
        assert "422" in operation["responses"]
    assert "Request" in spec["components"]["schemas"] and {"/", "/metrics"} <= set(spec["paths"])
