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
