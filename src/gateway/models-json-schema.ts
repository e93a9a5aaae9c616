// The shape of Pi's models.json, as far as routing depends on it; every other field passes
// through to the sandbox's copy untouched (Pi's docs/models-configuration.md describes them all).
// Built on first use (util/zod.ts): a run without a models.json never loads zod for it.
import { usageError } from "../errors.js";
import { formatZodIssues } from "../util/config-file.js";
import { lazily, z } from "../util/zod.js";

const schemas = lazily(() => {
  const httpUrl = z.string().refine((value) => {
    try {
      const url = new URL(value);
      return (url.protocol === "http:" || url.protocol === "https:") && !url.username && !url.password;
    } catch {
      return false;
    }
  }, "must be an absolute http(s) URL without credentials");
  const headerRecord = z.record(z.string(), z.string());
  const modelSchema = z.looseObject({
    id: z.string().min(1),
    api: z.string().min(1).optional(),
    baseUrl: httpUrl.optional(),
    headers: headerRecord.optional(),
  });
  const providerSchema = z.looseObject({
    baseUrl: httpUrl.optional(),
    api: z.string().min(1).optional(),
    apiKey: z.string().optional(),
    headers: headerRecord.optional(),
    authHeader: z.boolean().optional(),
    models: z.array(modelSchema).optional(),
    modelOverrides: z.record(z.string(), z.looseObject({ headers: headerRecord.optional() })).optional(),
  });
  const modelsJsonSchema = z.looseObject({ providers: z.record(z.string(), providerSchema).optional() });
  return { modelSchema, providerSchema, modelsJsonSchema };
});

type Schemas = ReturnType<typeof schemas>;
export type ModelsJsonProvider = z.infer<Schemas["providerSchema"]>;
export type ModelsJsonModel = z.infer<Schemas["modelSchema"]>;

/** The providers of a parsed models.json (none when there is no file). */
export function parseModelsJson(value: unknown): Record<string, ModelsJsonProvider> {
  if (value === undefined || value === null) return {};
  const result = schemas().modelsJsonSchema.safeParse(value);
  if (!result.success) {
    throw usageError(
      `Invalid models.json:\n${formatZodIssues(result.error.issues)}`,
      "Fix the listed fields; Pi's docs/models-configuration.md describes every field.",
    );
  }
  return result.data.providers ?? {};
}

/**
 * Every value Pi resolves (literal, "$VAR" template or "!command"), with where it sits:
 * `providers.<id>.apiKey`, `providers.<id>.headers.<name>`, `providers.<id>.models.<i>.headers.<name>`,
 * `providers.<id>.modelOverrides.<model>.headers.<name>`.
 */
export function configValuesOf(providers: Record<string, ModelsJsonProvider>): Array<{ where: string; value: string }> {
  const out: Array<{ where: string; value: string }> = [];
  const headers = (where: string, record: Record<string, string> | undefined) => {
    for (const [name, value] of Object.entries(record ?? {})) out.push({ where: `${where}.headers.${name}`, value });
  };
  for (const [id, provider] of Object.entries(providers)) {
    const where = `providers.${id}`;
    if (provider.apiKey !== undefined) out.push({ where: `${where}.apiKey`, value: provider.apiKey });
    headers(where, provider.headers);
    for (const [index, model] of (provider.models ?? []).entries()) headers(`${where}.models.${index}`, model.headers);
    for (const [model, override] of Object.entries(provider.modelOverrides ?? {})) {
      headers(`${where}.modelOverrides.${model}`, override.headers);
    }
  }
  return out;
}
