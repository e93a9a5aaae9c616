// Linux's O_PATH, which Node does not export (the same value on every architecture Node runs on
// but alpha, parisc and sparc): an fd that opens nothing and needs no read permission, to name an
// entry through "/proc/self/fd/<fd>" as openat/fchmodat would (Node has neither).
export const O_PATH = 0o10000000;
