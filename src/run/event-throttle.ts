// Events the host writes because of something the sandbox did (a refused gateway request, an egress
// decision) are at the sandbox's command: 40,000 refusals in 10 s must not become 40,000 events. Per
// key (the event type plus a stable reason) a burst of events passes per window; the rest are held
// back and counted, and the next event of that key that passes (or a summary when the run ends)
// carries `repeated: n`: it stands for itself and n similar events that were not reported one by one.

export interface ThrottledEvent {
  type: string;
  data: Record<string, unknown>;
}

interface EventThrottleOptions {
  /** Events per key that pass in one window; default 10. */
  burst?: number;
  windowMs?: number;
  now?: () => number;
}

export class EventThrottle {
  readonly #windows = new Map<string, { opened: number; passed: number; held: number; last?: ThrottledEvent }>();

  constructor(
    private readonly emit: (event: ThrottledEvent) => void,
    private readonly options: EventThrottleOptions = {},
  ) {}

  offer(key: string, event: ThrottledEvent): void {
    const now = this.options.now?.() ?? Date.now();
    let window = this.#windows.get(key);
    if (!window || now - window.opened >= (this.options.windowMs ?? 1000)) {
      const held = window?.held ?? 0;
      window = { opened: now, passed: 0, held };
      this.#windows.set(key, window);
    }
    if (window.passed >= (this.options.burst ?? 10)) {
      window.held++;
      window.last = event;
      return;
    }
    window.passed++;
    const repeated = window.held;
    window.held = 0;
    this.emit(repeated > 0 ? { type: event.type, data: { ...event.data, repeated } } : event);
  }

  /** Reports what is still held back, once per key (call when the run ends). */
  flush(): void {
    for (const window of this.#windows.values()) {
      if (window.held > 0 && window.last) {
        this.emit({ type: window.last.type, data: { ...window.last.data, repeated: window.held - 1 } });
      }
      window.held = 0;
    }
  }
}
