// Which PID namespace this process lives in: a pid names a process only inside its namespace, and
// controllers in containers that share an engine and a host name each have their own.
import fs from "node:fs";

let pidNamespace: string | null | undefined;

/**
 * This process's PID namespace ("pid:[4026531836]"), or undefined where /proc does not say: a pid
 * names this process only inside it (containers sharing an engine and a host name each have one).
 */
export function ownPidNamespace(): string | undefined {
  if (pidNamespace === undefined) {
    try {
      pidNamespace = fs.readlinkSync("/proc/self/ns/pid");
    } catch {
      pidNamespace = null;
    }
  }
  return pidNamespace ?? undefined;
}

/** The field an owner's identity carries for it (nothing where /proc does not say). */
export function pidnsField(): { pidns?: string } {
  const pidns = ownPidNamespace();
  return pidns ? { pidns } : {};
}
