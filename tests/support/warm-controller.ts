// A controller in its own process that keeps warm sandboxes and does nothing else, for the tests
// that freeze or kill it (tests/integration/warm-lifecycle.test.ts). Run as
// `node <its bundle> '<spec json>'` (harness.ts testScript("warmController")); it prints one JSON line
// once its pool is full ({"kind":"ready","containers":[...]}) and then waits to be stopped, or
// (`end: "return"`) simply ends, as a program that forgot `agent.close()` does, or (`end: "exit"`)
// calls process.exit(0) at once, with its pool still open.
import { ContainerPiAgent } from "../../src/container-pi-agent.js";
import { createDockerClient } from "../../src/engine/docker-connection.js";
import type { Policy } from "../../src/policy/policy-schema.js";
import { LABEL_OWNER_PID, LABEL_WARM } from "../../src/sandbox-contract.js";

interface WarmControllerSpec {
  models: Record<string, unknown>;
  model: string;
  policy: Policy;
  size: number;
  idleSeconds: number;
  end?: "wait" | "return" | "exit";
}

const spec = JSON.parse(process.argv[2] ?? "{}") as WarmControllerSpec;
const agent = new ContainerPiAgent({
  models: spec.models,
  model: spec.model,
  policy: spec.policy,
  reapOrphans: false,
  warm: { size: spec.size, idleSeconds: spec.idleSeconds },
});
await agent.warmUp();
const containers = await createDockerClient().listContainers({
  all: true,
  filters: { label: [`${LABEL_WARM}=true`, `${LABEL_OWNER_PID}=${process.pid}`] },
});
process.stdout.write(`${JSON.stringify({ kind: "ready", containers: containers.map((c) => c.Id) })}\n`);
if (spec.end === "exit") process.exit(0);
if (spec.end !== "return") setInterval(() => {}, 60_000);
