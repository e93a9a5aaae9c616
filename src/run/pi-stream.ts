// The container's output as it arrives: stdout and stderr share the run's byte budget (code in the
// sandbox can write to /proc/1/fd/1 and /2), stdout is split into JSONL records with a line cap,
// each record is parsed, counted and passed on as an event; junk lines are counted and, past a few,
// trip the run. Keeps only a stderr tail and counters: memory stays flat however much arrives.
import { JsonlReader } from "../pi/jsonl-reader.js";
import { type PiEvent, parsePiRecord } from "../pi/pi-events.js";
import type { PlanLimits } from "../sandbox-contract.js";
import type { OutputBudget } from "./output-budget.js";
import type { RunTrip } from "./run-trip.js";

const STDERR_TAIL_BYTES = 16 * 1024;
/**
 * Pi writes nothing but JSON records; more unreadable lines than this means code in the sandbox is
 * writing into Pi's stdout. Stopping there also bounds the controller's heap: every failed
 * JSON.parse of a long line leaves garbage V8 is slow to collect.
 */
const MAX_BAD_RECORDS = 20;

interface PiStreamHandlers {
  onEvent(event: PiEvent): void;
  onInvalidRecord(error: string, preview: string): void;
}

export class PiStream {
  readonly #trip: RunTrip;
  readonly #budget: OutputBudget;
  readonly #reader: JsonlReader;
  #stderrTail = "";
  #badRecords = 0;
  #tooLarge = 0;

  constructor(limits: Pick<PlanLimits, "maxLineMb">, trip: RunTrip, budget: OutputBudget, handlers: PiStreamHandlers) {
    this.#trip = trip;
    this.#budget = budget;
    this.#reader = new JsonlReader({
      maxLineBytes: limits.maxLineMb * 1024 * 1024,
      onLine: (line, bytes) => {
        const parsed = parsePiRecord(line, bytes);
        if (parsed.ok) {
          handlers.onEvent(parsed.event);
          return;
        }
        if (parsed.tooLarge) this.#tooLarge++;
        if (++this.#badRecords > MAX_BAD_RECORDS) {
          trip.fire({
            code: "limit",
            limit: "records",
            message: `Pi's output had more than ${MAX_BAD_RECORDS} lines that are not Pi events.`,
          });
          return;
        }
        // A copy, not a slice: a slice would keep the whole (up to maxLineMb) line alive.
        handlers.onInvalidRecord(parsed.error, Buffer.from(line.slice(0, 200)).toString());
      },
      // Reported as soon as the line passes the limit: the container is stopped, not read to the end.
      onOversizeLine: () =>
        trip.fire({
          code: "limit",
          limit: "line",
          message: `Pi wrote an event line over the ${limits.maxLineMb} MiB line limit.`,
        }),
    });
  }

  get badRecords(): number {
    return this.#badRecords;
  }
  /** Of the bad records, those refused for holding more structure than PI_RECORD_SHAPE allows. */
  get tooLargeRecords(): number {
    return this.#tooLarge;
  }
  get stderrTail(): string {
    return this.#stderrTail.trim();
  }

  stdout(chunk: Buffer): void {
    if (this.#budget.spend(chunk.length) && !this.#trip.tripped) this.#reader.push(chunk);
  }

  stderr(chunk: Buffer): void {
    if (this.#budget.spend(chunk.length))
      this.#stderrTail = (this.#stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL_BYTES);
  }

  endStdout(): void {
    this.#reader.end();
  }
}
