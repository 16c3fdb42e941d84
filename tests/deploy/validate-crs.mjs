// Validates prometheus-operator custom resources (ServiceMonitor, PodMonitor,
// PrometheusRule) against the schemas of @kubernetes-models/prometheus-operator
// (generated from prometheus-operator's Go API types): required fields, types,
// enums and patterns such as durations. Unknown fields are caught by the
// TypeScript check of the same objects (tests/deploy/test_chart.py).
//
//   node validate-crs.mjs < objects.json      (a JSON array of objects)
//
// Prints one line per object; exits 1 if any is invalid or of an unknown kind.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

// Resolve the package from the node_modules given by NODE_MODULES_DIR.
const base = process.env.NODE_MODULES_DIR;
if (!base) {
  console.error("NODE_MODULES_DIR is not set");
  process.exit(2);
}
const load = async (kind) =>
  (await import(pathToFileURL(`${base}/@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/${kind}.js`).href))[kind];

const objects = JSON.parse(readFileSync(0, "utf8"));
let failed = 0;
for (const obj of objects) {
  const name = `${obj.kind}/${obj.metadata?.name}`;
  if (obj.apiVersion !== "monitoring.coreos.com/v1" || !["ServiceMonitor", "PodMonitor", "PrometheusRule"].includes(obj.kind)) {
    console.log(`FAIL ${name}: no schema for ${obj.apiVersion} ${obj.kind}`);
    failed++;
    continue;
  }
  const Model = await load(obj.kind);
  try {
    new Model(obj).validate();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e.message}`);
    failed++;
  }
}
process.exit(failed ? 1 : 0);
