/** Teardown steps, run in reverse order of setup; a failing step does not stop the others. */
export class Cleanups {
  readonly #steps: Array<() => Promise<void> | void> = [];

  add(step: () => Promise<void> | void): void {
    this.#steps.push(step);
  }

  async run(): Promise<void> {
    for (const step of this.#steps.reverse()) {
      await Promise.resolve()
        .then(step)
        .catch(() => {});
    }
  }
}
