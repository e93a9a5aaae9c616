// An uncaught exception stops a command as SIGTERM does (src/cli/stop-on-crash.ts), so the sandbox
// is stopped, judged and removed; with nothing listening, or at a second one, the process exits 1.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { stopOnCrash } from "../../src/cli/stop-on-crash.js";

function fakeProcess() {
  const emitter = new EventEmitter();
  const exits: number[] = [];
  const proc = Object.assign(emitter, { exit: (code?: number) => void exits.push(code ?? 0) });
  return { proc: proc as unknown as NodeJS.Process, emitter, exits };
}

describe("stopOnCrash", () => {
  it("the first uncaught exception is said and stops the listening command as SIGTERM; a second exits 1", () => {
    const { proc, emitter, exits } = fakeProcess();
    const said: string[] = [];
    const crash = stopOnCrash(proc, (text) => void said.push(text));
    const stops: unknown[] = [];
    emitter.on("SIGTERM", (name: unknown) => void stops.push(name));
    const error = new TypeError("Invalid character in header content");
    emitter.emit("uncaughtException", error);
    expect(stops).toEqual(["SIGTERM"]);
    expect(exits).toEqual([]);
    expect(crash.crashed()).toBe(error);
    expect(said[0]).toContain(
      "internal error (TypeError: Invalid character in header content); stopping the command as SIGTERM would",
    );
    emitter.emit("uncaughtException", new Error("again"));
    expect(stops).toEqual(["SIGTERM"]);
    expect(exits).toEqual([1]);
  });

  it("with no command listening for SIGTERM, exits 1 at once", () => {
    const { proc, emitter, exits } = fakeProcess();
    const said: string[] = [];
    stopOnCrash(proc, (text) => void said.push(text));
    emitter.emit("uncaughtException", "not an Error");
    expect(exits).toEqual([1]);
    expect(said).toEqual(["sandbox-run: internal error ('not an Error'); exiting.\n"]);
    // What cannot be printed (no toString) is said as such, not thrown from the handler.
    emitter.emit("uncaughtException", Object.create(null));
    expect(exits).toEqual([1, 1]);
    // With the stack asked for (SANDBOX_RUN_DEBUG): one whose stack getter throws, a Proxy whose
    // prototype trap throws, and escapes in a message, all said without the handler throwing.
    const debug = fakeProcess();
    const told: string[] = [];
    stopOnCrash(debug.proc, (text) => void told.push(text), true);
    const odd = new Error("\x1b]0;title\x07odd");
    Object.defineProperty(odd, "stack", {
      get() {
        throw new Error("no stack");
      },
    });
    debug.emitter.emit("uncaughtException", odd);
    const trap = new Proxy(
      {},
      {
        getPrototypeOf() {
          throw new Error("trap");
        },
      },
    );
    debug.emitter.emit("uncaughtException", trap);
    expect(debug.exits).toEqual([1, 1]);
    expect(told.join("")).not.toContain("\x1b");
    expect(told.join("")).toContain("(a stack that cannot be printed)");
    expect(said[1]).toMatch(
      /^sandbox-run: internal error \((\[Object: null prototype\] \{\}|an exception that cannot be printed)\); exiting/,
    );
  });
});
