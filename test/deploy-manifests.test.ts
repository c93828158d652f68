/**
 * The Helm chart, the plain Kubernetes manifests and the KServe runtime, checked for real: helm
 * lint and helm template with several values files, and every object decoded strictly (unknown
 * or duplicate fields are errors) by deploy/check into the Kubernetes API types, the Prometheus
 * Operator's and KEDA's, and KServe's OpenAPI models.
 */
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { checker, helm, kserveWheel, run, type Tool } from "./deploy-helpers.js";
import { ROOT } from "./helpers.js";

const CHART = join(ROOT, "deploy", "helm", "shoal");
const KUBE_VERSION = "1.33.0";
const VALUES = readdirSync(join(CHART, "ci")).filter((f) => f.endsWith(".yaml")).sort().map((f) => join(CHART, "ci", f));

describe("the Helm chart and the manifests", () => {
  let helmTool: Tool;
  let check: Tool;
  let wheel: Tool;

  before(async () => {
    [helmTool, check, wheel] = await Promise.all([helm(), checker(), kserveWheel()]);
  });

  /** `helm template` of the chart with these values files, as one YAML stream. */
  const render = async (...values: string[]) => (await run(helmTool.path!, ["template", "shoal", CHART, "--kube-version", KUBE_VERSION, ...values.flatMap((v) => ["-f", v])])).stdout;
  /** Runs the checker on the YAML given; resolves with its output, whatever its exit code. */
  const checked = (yaml: string, ...args: string[]) =>
    run(check.path!, [...(wheel.path === undefined ? [] : ["-kserve-wheel", wheel.path]), ...args, "-"], { input: yaml }).then(
      (r) => ({ code: 0, out: r.stdout }),
      (err: { code: number; stdout: string }) => ({ code: err.code, out: err.stdout }),
    );
  const skipped = (t: { skip: (reason: string) => void }, ...tools: Tool[]) => {
    const missing = tools.find((tool) => tool.skip !== undefined);
    if (missing !== undefined) t.skip(missing.skip);
    return missing !== undefined;
  };

  test("helm lint passes with the default values and every values file of ci/", async (t) => {
    if (skipped(t, helmTool)) return;
    for (const values of [[], ...VALUES.map((v) => [v])]) {
      const { stdout } = await run(helmTool.path!, ["lint", CHART, "--strict", "--kube-version", KUBE_VERSION, ...values.flatMap((v) => ["-f", v])]);
      assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, `${values}: ${stdout}`);
    }
  });

  test("every object rendered with every values file decodes strictly into its API type", async (t) => {
    if (skipped(t, helmTool, check)) return;
    const kinds: Record<string, string[]> = {};
    for (const values of [[], ...VALUES.map((v) => [v])]) {
      const name = values[0]?.split("/").pop() ?? "defaults";
      const { code, out } = await checked(await render(...values));
      assert.equal(code, 0, `${name}:\n${out}`);
      kinds[name] = [...out.matchAll(/^ok \S+ \S+\/(\w+) /gm)].map((m) => m[1]!).sort();
    }
    assert.deepEqual(kinds, {
      defaults: ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"],
      "configmap-keda.yaml": ["ConfigMap", "Deployment", "PodDisruptionBudget", "ScaledObject", "Secret", "Service", "ServiceAccount", "ServiceMonitor"],
      "existing-objects.yaml": ["Deployment", "Service"],
      "image-models.yaml": ["Deployment", "PodDisruptionBudget", "Service", "ServiceAccount"],
      "init-hpa.yaml": ["Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service", "ServiceAccount"],
    });
  });

  test("the checker fails on a misspelt field, a wrong type, a duplicate key and an unknown kind", async (t) => {
    if (skipped(t, helmTool, check)) return;
    const yaml = await render();
    for (const [from, to, error] of [
      ["terminationGracePeriodSeconds:", "terminationGracePeriod:", /unknown field "terminationGracePeriod"/],
      ["readOnlyRootFilesystem: true", "readOnlyRootFilesystem: \"yes\"", /readOnlyRootFilesystem/],
      ["kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", /unknown kind policy\/v1\/PodDisruptionBudgets/],
      ["  maxUnavailable: 1\n", "  maxUnavailable: 1\n  maxUnavailable: 2\n", /already set/],
    ] as const) {
      assert.ok(yaml.includes(from), from);
      const { code, out } = await checked(yaml.replace(from, to));
      assert.equal(code, 1, `${to}: ${out}`);
      assert.match(out, error);
    }
  });

  test("the checker fails on objects that do not agree: a Service, probe, mount, autoscaler or ServiceMonitor naming what is not there", async (t) => {
    if (skipped(t, helmTool, check)) return;
    const defaults = await render();
    const plain = readFileSync(join(ROOT, "deploy", "k8s", "shoal.yaml"), "utf8");
    const monitored = await render(join(CHART, "ci", "configmap-keda.yaml"));
    for (const [yaml, from, to, error] of [
      [defaults, "targetPort: http", "targetPort: web", /Service shoal: port http targets "web", which no container of Deployment shoal names/],
      [defaults, "path: /healthz\n              port: http", "path: /healthz\n              port: metrics", /the liveness probe's port "metrics" is not one of its ports/],
      [defaults, "- name: tmp\n              mountPath: /tmp", "- name: scratch\n              mountPath: /tmp", /container shoal mounts "scratch", which is not a volume of the pod/],
      [defaults, "    matchLabels:\n      app.kubernetes.io/name: shoal\n      app.kubernetes.io/instance: shoal\n---", "    matchLabels:\n      app.kubernetes.io/name: shoal\n      app.kubernetes.io/instance: other\n---", /PodDisruptionBudget shoal selects no pod/],
      [plain, "    kind: Deployment\n    name: shoal\n", "    kind: Deployment\n    name: shoal-old\n", /HorizontalPodAutoscaler shoal scales Deployment shoal-old, not a Deployment here/],
      [monitored, "    - port: http\n", "    - port: metrics\n", /ServiceMonitor shoal scrapes port "metrics", which Service shoal does not name/],
    ] as const) {
      assert.ok(yaml.includes(from), from);
      const { code, out } = await checked(yaml.replace(from, to));
      assert.equal(code, 1, `${to}: ${out}`);
      assert.match(out, error);
    }
  });

  test("the drain and the probes agree: grace period = preStop + timeout + margin, /readyz and /healthz on the http port", async (t) => {
    if (skipped(t, helmTool)) return;
    const defaults = await render();
    assert.match(defaults, /terminationGracePeriodSeconds: 18\n/); // 5 s preStop + 3 s --timeout + 10 s
    assert.match(defaults, /setTimeout\(\(\) => \{\}, 5000\)/);
    assert.match(defaults, /startupProbe:\n\s+httpGet:\n\s+path: \/readyz\n\s+port: http/);
    assert.match(defaults, /readinessProbe:\n\s+httpGet:\n\s+path: \/readyz/);
    assert.match(defaults, /livenessProbe:\n\s+httpGet:\n\s+path: \/healthz/);
    assert.match(defaults, /runAsNonRoot: true/);
    assert.match(defaults, /readOnlyRootFilesystem: true/);
    assert.match(defaults, /allowPrivilegeEscalation: false/);
    assert.match(defaults, /maxUnavailable: 0/, "a rolling update starts a new pod before draining an old one");
    const big = await render(join(CHART, "ci", "init-hpa.yaml"));
    assert.match(big, /terminationGracePeriodSeconds: 25\n/); // 5 + 10 + 10
    assert.match(big, /requiredDuringSchedulingIgnoredDuringExecution:\n\s+- topologyKey: kubernetes.io\/hostname/);
    assert.match(big, /name: shoal_stage_queue_depth\n\s+target:\n\s+type: AverageValue\n\s+averageValue: "4"/);
    assert.match(big, /name: shoal_queue_behind_seconds\n\s+target:\n\s+type: AverageValue\n\s+averageValue: "250m"/);
    const service = big.split("\n---\n").find((doc) => /^kind: Service$/m.test(doc))!;
    assert.match(service, /type: LoadBalancer/);
    assert.doesNotMatch(service, /name: grpc/);
    assert.doesNotMatch(big, /SHOAL_GRPC_PORT/);
    assert.match(defaults, /name: SHOAL_GRPC_PORT\n\s+value: "8001"/);
    const baked = await render(join(CHART, "ci", "image-models.yaml"));
    assert.doesNotMatch(baked, /name: models/, "nothing hides the image's /models");
    assert.match(baked, /image: "registry.example.com\/shoal-vad:2024-06"/);
    const keda = await render(join(CHART, "ci", "configmap-keda.yaml"));
    assert.match(keda, /query: "sum\(shoal_requests_in_flight\{namespace=\\"default\\",pod=~\\"shoal-.*\\"\}\)"/);
    // How far behind, the signal to scale on: a Value trigger, replicas scaled by behind / threshold.
    assert.match(keda, /- type: prometheus\n\s+metricType: Value\n\s+metadata:\n\s+serverAddress: \S+\n\s+query: "max\(shoal_queue_behind_seconds\{namespace=\\"default\\",pod=~\\"shoal-.*\\"\}\)"\n\s+threshold: "0.5"/);
    assert.match(keda, /name: SHOAL_ADMIN_TOKEN_FILE\n\s+value: \/var\/run\/secrets\/shoal\/token/);
    assert.match(keda, /key: upper--upper.mjs\n\s+path: upper\/upper.mjs/);
  });

  test("values that cannot work are refused with a reason", async (t) => {
    if (skipped(t, helmTool)) return;
    const refused = (...sets: string[]) =>
      run(helmTool.path!, ["template", "shoal", CHART, "--kube-version", KUBE_VERSION, ...sets.flatMap((s) => ["--set", s])]).then(
        () => "",
        (err: Error) => err.message,
      );
    assert.match(await refused("autoscaling.enabled=true", "keda.enabled=true"), /not both/);
    assert.match(await refused("modelRepository.source=s3"), /must be pvc, configMap, initContainer or image/);
    assert.match(await refused("modelRepository.source=configMap"), /give the name of an existing ConfigMap, or files/);
  });

  test("deploy/k8s/shoal.yaml is what the chart renders with deploy/k8s/values.yaml, and it and the PVC check", async (t) => {
    if (skipped(t, helmTool, check)) return;
    const { stdout } = await run("bash", [join(ROOT, "deploy", "k8s", "render.sh")], { env: { ...process.env, HELM: helmTool.path! } });
    assert.equal(readFileSync(join(ROOT, "deploy", "k8s", "shoal.yaml"), "utf8"), stdout, "run deploy/k8s/render.sh and commit its output");
    for (const file of ["shoal.yaml", "models-pvc.yaml"]) {
      const { code, out } = await checked(readFileSync(join(ROOT, "deploy", "k8s", file), "utf8"));
      assert.equal(code, 0, `${file}:\n${out}`);
    }
  });

  test("the KServe ClusterServingRuntime and InferenceServices match KServe's OpenAPI models", async (t) => {
    if (skipped(t, check, wheel)) return;
    const dir = join(ROOT, "deploy", "kserve");
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
      const yaml = readFileSync(join(dir, file), "utf8");
      const { code, out } = await checked(yaml);
      assert.equal(code, 0, `${file}:\n${out}`);
      assert.match(out, /^ok .*serving\.kserve\.io/m);
    }
    const runtime = readFileSync(join(dir, "cluster-serving-runtime.yaml"), "utf8");
    assert.match(runtime, /protocolVersions:\n\s+- v2\n\s+- grpc-v2/);
    assert.match(runtime, /- name: onnx[\s\S]*- name: shoal/);
    assert.match(runtime, /--model-repository=\/mnt\/models/);
    for (const [from, to, error] of [
      ["supportedModelFormats:", "supportedModelFormat:", /unknown field "supportedModelFormat" of V1alpha1ServingRuntimeSpec/],
      ["      autoSelect: true\n      priority: 1\n    - name: shoal", "      autoSelect: \"yes\"\n      priority: 1\n    - name: shoal", /autoSelect: expected true or false/],
      ["readOnlyRootFilesystem: true", "readOnlyRootFS: true", /V1Container.*unknown field "readOnlyRootFS"/],
    ] as const) {
      const { code, out } = await checked(runtime.replace(from, to));
      assert.equal(code, 1, `${to}: ${out}`);
      assert.match(out, error);
    }
    const onnx = readFileSync(join(dir, "inferenceservice-onnx.yaml"), "utf8");
    const { code, out } = await checked(onnx.replace("      storageUri:", "      storageURI:"));
    assert.equal(code, 1, out);
    assert.match(out, /unknown field "storageURI" of V1beta1ModelSpec/);
  });
});
