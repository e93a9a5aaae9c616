// Every container we create carries these labels, so `gc` and start-up reaping can find
// what a dead controller left behind without any state file.
export const LABEL_MANAGED = "sandbox-run.managed";
export const LABEL_RUN_ID = "sandbox-run.run-id";
export const LABEL_OWNER_PID = "sandbox-run.owner-pid";
export const LABEL_OWNER_HOST = "sandbox-run.owner-host";
export const LABEL_CREATED_AT = "sandbox-run.created-at";
export const LABEL_DEADLINE = "sandbox-run.deadline";
/** "uid:gid" the workspace goes back to when a root caller lent it to the sandbox uid. */
export const LABEL_HAND_BACK = "sandbox-run.hand-back";
/** JSON array of the absolute roots a root caller lent to the sandbox uid (workspace in any mode, writable roots). */
export const LABEL_LENT_ROOTS = "sandbox-run.lent-roots";

export const IMAGE_LABEL_CONTENT_HASH = "sandbox-run.content-hash";
export const IMAGE_LABEL_PI_VERSION = "sandbox-run.pi-version";
export const IMAGE_LABEL_NODE_VERSION = "sandbox-run.node-version";
export const IMAGE_LABEL_BASE = "sandbox-run.base-image";
/** On images built with `image build --apt`: the Debian packages added to the runner image. */
export const IMAGE_LABEL_APT_PACKAGES = "sandbox-run.apt-packages";
