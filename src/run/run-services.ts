// The host side a sandbox talks to during one run: the replay upstream when replaying, the model
// gateway (keys added outside the sandbox; the turn budget kept where code inside cannot get around
// it; every exchange checked against the conversation ledger), and the egress proxy for an
// allow-list policy. Each piece registers its own close with the run's cleanups.

import type { ConversationLedger } from "../gateway/conversation-ledger.js";
import type { GatewayRequestRecord } from "../gateway/gateway-records.js";
import type { RefusalCode } from "../gateway/gateway-refusal.js";
import type { GatewayRoute } from "../gateway/gateway-routes.js";
import { type ModelWait, startModelGateway } from "../gateway/model-gateway.js";
import {
  DEFAULT_MAX_REFUSED_BYTES,
  DEFAULT_MAX_UNANSWERED_BYTES,
  DEFAULT_UNANSWERED_ALLOWANCE,
} from "../gateway/refused-bytes.js";
import { hostCaBundleFile } from "../proxy/host-ca-bundle.js";
import type { TrafficSink } from "../record/run-recorder.js";
import type { Cleanups } from "./cleanups.js";
import type { EventThrottle } from "./event-throttle.js";
import { type InvalidResult, InvalidResultWatch } from "./invalid-result-watch.js";
import type { PlannedRun } from "./plan/prepare-plan.js";
import { type ReplayUpstream, startReplayUpstream } from "./replay-upstream.js";
import { type EgressOverrides, startRunEgress } from "./run-egress.js";
import type { RunTimeline } from "./run-events.js";
import type { RunTrip, Trip } from "./run-trip.js";
import { UNBOUNDED_CHECK_HINT } from "./validate-in-worker.js";

interface RunServicesInput {
  planned: PlannedRun;
  /** The routes with their credentials resolved (route-credentials.ts). */
  routes: GatewayRoute[];
  runDir: string;
  piVersion: string;
  timeline: RunTimeline;
  trip: RunTrip;
  /** Events the sandbox causes on the host: throttled and paid for from the output budget. */
  driven: EventThrottle;
  /** The run's evidence: what the model said, as the gateway relayed it. */
  ledger: ConversationLedger;
  traffic?: TrafficSink;
  /** Values that must not leave the run (the policy's secrets, once read). */
  forbid(values: readonly string[]): void;
  cleanups: Cleanups;
  /** Tests only (run-egress.ts). */
  egressOverrides?: EgressOverrides;
}

interface RunServices {
  replay?: ReplayUpstream;
  /** What the run waits on the model for now (the gateway's open requests), for a timeout's message. */
  modelWait(): ModelWait | undefined;
}

/** Refusals of a request Pi itself may send (not of a path, route or method Pi never uses). */
const MODEL_REQUEST_REFUSALS: ReadonlySet<RefusalCode> = new Set<RefusalCode>([
  "body-too-large",
  "body-unreadable",
  "request-policy",
  "turn-budget",
  "run-stopped",
  "closing",
  "busy",
]);

/** A refused request Pi may have sent, as its code and status (never the detail); undefined for any other request. */
export function modelRequestRefusal(record: Pick<GatewayRequestRecord, "reason" | "status">): string | undefined {
  return record.reason && MODEL_REQUEST_REFUSALS.has(record.reason)
    ? `${record.reason}, HTTP ${record.status}`
    : undefined;
}

export async function startRunServices(input: RunServicesInput): Promise<RunServices> {
  const { planned, runDir, timeline, trip, driven, ledger, traffic, cleanups } = input;
  const { run, plan } = planned;
  let routes = input.routes;

  // Replay: the route's upstream is a host-side server answering from the recording; nothing leaves the host.
  const replay = planned.replay
    ? await startReplayUpstream(planned.replay, routes, { piVersion: input.piVersion, timeline, trip, driven })
    : undefined;
  if (replay) {
    cleanups.add(() => replay.close());
    routes = replay.routes;
  }

  // Schema mode: every final result the model gives in Pi's conversation is judged on the host.
  const invalidResults =
    run.validator && plan.schema && plan.finalToolName
      ? new InvalidResultWatch({ finalToolName: plan.finalToolName, schema: plan.schema, validator: run.validator })
      : undefined;
  // The run's check worker (validate-in-worker.ts): started now, beside the container, so that the
  // first check does not wait for it to load the validators (~250 ms of CPU), unless the schema is
  // plain (its checks of small values run on this thread: a large value starts it); it ends with the run.
  const checks = run.validator?.worker;
  if (checks) {
    if (checks.needsWorker) checks.start();
    cleanups.add(() => checks.close());
  }
  const gateway = await startModelGateway({
    socketPath: `${runDir}/gateway.sock`,
    routes,
    maxOutputTokens: run.policy.limits.maxOutputTokens,
    onRequest: (record) => {
      const type = record.refused ? "gateway.refused" : "gateway.request";
      // A refused model request is a failure Pi may report as a model error; told by its code and
      // status only (the detail can quote what the sandbox sent, e.g. a route name it chose).
      const refused = modelRequestRefusal(record);
      if (refused) ledger.refused(refused);
      driven.offer(`${type} ${record.reason ?? record.status} ${record.method}`, { type, data: { ...record } });
    },
    ...(traffic ? { recordExchanges: traffic.limits } : {}),
    onExchange: (exchange) => {
      traffic?.exchange(exchange);
      const verdict = ledger.add(exchange);
      const data = {
        seq: exchange.seq,
        status: exchange.status,
        relay: exchange.relay,
        toolCalls: exchange.reply?.toolCalls.length ?? 0,
        ...(exchange.reply?.piStopReason ? { stopReason: exchange.reply.piStopReason } : {}),
        ...(verdict.onChain ? { chain: verdict.as } : { chain: "off", reason: verdict.reason, detail: verdict.detail }),
      };
      // Pi's own exchanges are bounded by its turns; off-chain ones are the sandbox's doing.
      if (verdict.onChain) timeline.sandbox("gateway.exchange", data);
      else driven.offer(`gateway.exchange off ${verdict.reason}`, { type: "gateway.exchange", data });
      const reply = verdict.onChain && ledger.last?.delivered ? exchange.reply : undefined;
      // Judged in the run's check worker, with a deadline (or on this thread, a plain schema's small
      // valid values): this thread stays free for the run's timers and signals (review, session 35).
      const judgedAs = (judged: { invalid?: InvalidResult; trip?: Trip }) => {
        if (judged.invalid) timeline.sandbox("result.invalid", { seq: exchange.seq, ...judged.invalid });
        if (judged.trip) trip.fire(judged.trip);
      };
      // A check that throws (a bug, a value no check foresaw) is a value the host could not check:
      // the run stops, never a rejection nobody handles (review of session 36's fixes).
      if (reply && invalidResults)
        void invalidResults
          .observeInWorker(reply)
          .then(judgedAs)
          .catch((error: unknown) =>
            trip.fire({
              code: "invalid-result",
              message: `The model's final result cannot be checked: the host's check failed (${error instanceof Error ? error.message : String(error)}).`,
              hint: UNBOUNDED_CHECK_HINT,
            }),
          );
    },
    // A request after an invalid final result waits for the host's verdict on it (in the worker).
    ...(invalidResults ? { beforeGeneration: async () => void (await invalidResults.settled()) } : {}),
    maxGenerations: run.budgets.maxTurns,
    onBudgetExceeded: (attempted) =>
      trip.fire({
        code: "limit",
        limit: "turns",
        message: `The sandbox asked for model response ${attempted}, over the budget of ${run.budgets.maxTurns} turns.`,
      }),
    // Pi sends nothing the gateway refuses: bodies read only to be refused are the sandbox's doing.
    onRefusalsExceeded: ({ bytes, requests }) =>
      trip.fire({
        code: "limit",
        limit: "refusals",
        message: `The sandbox sent ${requests} model requests the gateway refused, ${Math.round(bytes / 1048576)} MiB of bodies in all: more than the ${DEFAULT_MAX_REFUSED_BYTES / 1048576} MiB a run may make the host read and refuse.`,
      }),
    // A provider that keeps failing ends Pi's run first (it retries a few times); past this, the
    // bodies are the sandbox's own, sent for the upstream to turn down.
    onUnansweredExceeded: ({ bytes, requests }) =>
      trip.fire({
        code: "limit",
        limit: "refusals",
        message: `The model provider turned down or never answered ${requests} model requests of this run, ${Math.round(bytes / 1048576)} MiB of bodies in all: more than the ${DEFAULT_MAX_UNANSWERED_BYTES / 1048576} MiB (and ${DEFAULT_UNANSWERED_ALLOWANCE} times the bodies of the requests answered) a run may make the host read without a model response.`,
      }),
  });
  cleanups.add(() => gateway.close());
  // From the trip on, the sandbox's further model requests are refused: stopping the container
  // takes a moment (seconds on a loaded machine) and Pi asks again meanwhile.
  trip.onTrip((t) => gateway.stopForwarding(t.code === "limit" && t.limit ? `limit ${t.limit}` : t.code));

  if (run.policy.network === "allowlist") {
    // The sandbox's only way to the internet: the proxy asks the policy's allow-list about every
    // connection and every decision lands in the run's events. With secrets, it also holds their
    // values and the run's CA (both only in this process's memory).
    const egress = await startRunEgress({
      runId: plan.runId,
      runDir,
      policy: run.policy,
      hostEnv: run.hostEnv,
      placeholders: planned.secretPlaceholders,
      hostCaBundle: run.policy.trustHostCaBundle ? hostCaBundleFile() : undefined,
      timeoutMs: run.timeoutMs,
      onDecision: ({ action, ...decision }) =>
        driven.offer(`egress.${action} ${decision.host}`, { type: `egress.${action}`, data: { ...decision } }),
      ...(input.egressOverrides ? { overrides: input.egressOverrides } : {}),
    });
    cleanups.add(() => egress.proxy.close());
    input.forbid(egress.secretValues);
  }
  const modelWait = () => gateway.waiting();
  return replay ? { replay, modelWait } : { modelWait };
}
