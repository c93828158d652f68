/**
 * The sampling decision at the door: each OTEL_TRACES_SAMPLER's choice for a new trace and for a
 * request in its client's trace, and a ratio's ids consistent with the rule it samples by (so the
 * SDK, or another service at the same ratio, keeps the same traces).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ROOT_CONTEXT, SamplingDecision } from "@opentelemetry/api";
import { TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace";
import { doorSampler, randomSpanId, randomTraceId, traceIdWord } from "../src/metrics/trace-sampling.js";

const SAMPLED = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", traceFlags: 1 };
const UNSAMPLED = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", traceFlags: 0 };

test("ids are lowercase hex of the right length, never all zero", () => {
  for (let i = 0; i < 1000; i++) {
    assert.match(randomTraceId(), /^[0-9a-f]{32}$/);
    assert.match(randomSpanId(), /^[0-9a-f]{16}$/);
  }
  assert.equal(traceIdWord("00000000000000000000000000000001"), 1);
  assert.equal(traceIdWord("ffffffff00000000000000000000000f"), 0xfffffff0);
});

test("always_on and always_off ignore the client's flag; parent-based samplers follow it", () => {
  const on = doorSampler("always_on");
  assert.match(on.root() ?? "", /^[0-9a-f]{32}$/);
  assert.equal(on.child(UNSAMPLED), true);
  const off = doorSampler("always_off");
  assert.equal(off.root(), undefined);
  assert.equal(off.child(SAMPLED), false);
  for (const name of [undefined, "parentbased_always_on", "PARENTBASED_ALWAYS_ON ", "no_such_sampler"]) {
    const s = doorSampler(name);
    assert.notEqual(s.root(), undefined, String(name));
    assert.equal(s.child(SAMPLED), true);
    assert.equal(s.child(UNSAMPLED), false);
  }
  const parentOff = doorSampler("parentbased_always_off");
  assert.equal(parentOff.root(), undefined);
  assert.equal(parentOff.child(SAMPLED), true);
  assert.equal(parentOff.child(UNSAMPLED), false);
});

test("a ratio keeps about its share of new traces, each id below the bound it samples by", () => {
  const s = doorSampler("traceidratio", "0.1");
  const bound = Math.floor(0.1 * (2 ** 32 - 1));
  let kept = 0;
  const N = 20_000;
  for (let i = 0; i < N; i++) {
    const id = s.root();
    if (id === undefined) continue;
    kept++;
    assert.ok(traceIdWord(id) < bound, id);
  }
  // 2,000 expected; 5 standard deviations (~212) either side.
  assert.ok(kept > 1_780 && kept < 2_220, `kept ${kept} of ${N}`);
  // A client's trace: by its id, whatever its flag (traceidratio is not parent-based).
  assert.equal(s.child({ traceId: "00000000000000000000000000000001", traceFlags: 0 }), true);
  assert.equal(s.child({ traceId: "ffffffff000000000000000000000000", traceFlags: 1 }), false);
  // Parent-based: the flag decides.
  const p = doorSampler("parentbased_traceidratio", "0.1");
  assert.equal(p.child({ traceId: "ffffffff000000000000000000000000", traceFlags: 1 }), true);
  assert.equal(p.child({ traceId: "00000000000000000000000000000001", traceFlags: 0 }), false);
});

test("a ratio of 0 keeps none, of 1 (or a bad argument) every trace", () => {
  const none = doorSampler("traceidratio", "0");
  for (let i = 0; i < 1000; i++) assert.equal(none.root(), undefined);
  for (const arg of ["1", undefined, "", "2", "-1", "x"]) {
    const all = doorSampler("parentbased_traceidratio", arg);
    for (let i = 0; i < 100; i++) assert.notEqual(all.root(), undefined, String(arg));
  }
});

test("a ratio decides every trace id as the SDK's ratio sampler does", () => {
  for (const ratio of [0.01, 0.25, 0.5]) {
    const ours = doorSampler("traceidratio", String(ratio));
    const theirs = new TraceIdRatioBasedSampler(ratio);
    for (let i = 0; i < 5_000; i++) {
      const traceId = randomTraceId();
      const kept = theirs.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED;
      assert.equal(ours.child({ traceId, traceFlags: 0 }), kept, `${ratio} ${traceId}`);
    }
    for (let i = 0; i < 2_000; i++) {
      const traceId = ours.root();
      if (traceId !== undefined) assert.equal(theirs.shouldSample(ROOT_CONTEXT, traceId).decision, SamplingDecision.RECORD_AND_SAMPLED);
    }
  }
});
