// The name of the CA bundle a run with secrets hands to the sandbox (sandbox-trust.ts), alone in a
// module of its own: the plan and the run-folder code need the name, not the writer (which loads
// Node's tls, and the CLI's planning would load it with them).
/** The bundle's file name in the run's folder. */
export const SANDBOX_TRUST_FILE = "sandbox-ca-certificates.crt";
