// Runs variants in rounds (A B C D, A B C D, ...) so drift on the machine (other work, cache
// state, thermal) spreads over all of them instead of landing on whichever ran last.
import { median, p90, round } from "./stats.js";
import type { Sample, Variant } from "./variants.js";

export interface VariantResult {
  key: string;
  label: string;
  runs: number;
  failures: number;
  errors: string[];
  samplesMs: number[];
  medianMs: number;
  p90Ms: number;
  /** Median of each phase, where the variant reports phases. */
  phasesMedianMs?: Record<string, number>;
}

export async function interleave(
  variants: Variant[],
  options: { warmup: number; runs: number; progress: (line: string) => void },
): Promise<VariantResult[]> {
  const samples = new Map<string, Sample[]>(variants.map((v) => [v.key, []]));
  const errors = new Map<string, string[]>(variants.map((v) => [v.key, []]));
  for (let round_ = 0; round_ < options.warmup + options.runs; round_++) {
    const warm = round_ < options.warmup;
    for (const variant of variants) {
      try {
        const sample = await variant.run();
        if (!warm) samples.get(variant.key)!.push(sample);
      } catch (error) {
        errors.get(variant.key)!.push(String((error as Error)?.message ?? error).slice(0, 300));
      }
    }
    options.progress(
      `  ${warm ? "warm-up" : "round"} ${warm ? round_ + 1 : round_ - options.warmup + 1}/${warm ? options.warmup : options.runs}`,
    );
  }
  return variants.map((variant) => {
    const list = samples.get(variant.key)!;
    const ms = list.map((s) => s.ms);
    const withPhases = list.filter((s) => s.phases);
    let phasesMedianMs: Record<string, number> | undefined;
    if (withPhases.length > 0) {
      phasesMedianMs = {};
      for (const name of Object.keys(withPhases[0]!.phases!)) {
        phasesMedianMs[name] = round(median(withPhases.map((s) => s.phases![name] ?? Number.NaN)));
      }
    }
    return {
      key: variant.key,
      label: variant.label,
      runs: ms.length,
      failures: errors.get(variant.key)!.length,
      errors: errors.get(variant.key)!,
      samplesMs: ms.map((x) => round(x)),
      medianMs: round(median(ms)),
      p90Ms: round(p90(ms)),
      phasesMedianMs,
    };
  });
}
