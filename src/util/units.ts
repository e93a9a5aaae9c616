// Sizes as messages say them.

/** Bytes in MiB, to one decimal. */
export function mib(bytes: number): number {
  return Math.round((bytes / 1048576) * 10) / 10;
}
