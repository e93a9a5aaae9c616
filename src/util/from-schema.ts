// The TypeScript type of the values a JSON Schema accepts, for schemas written as literals (inline,
// or `as const`): what `run(prompt, { schema })` resolves to. It covers what result schemas use:
// `type` (one or a list), `properties` with `required`, `additionalProperties`, `items` and
// `prefixItems`, `enum`, `const`, `anyOf`/`oneOf`/`allOf`. Anything else (`$ref`, `if`/`then`,
// `not`, a schema typed wider than a literal) gives `unknown` where it stands; the host validates
// the value either way, so the type never claims more than the schema checks.

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type UnionToIntersection<U> = (U extends unknown ? (u: U) => void : never) extends (i: infer I) => void ? I : never;

/** A schema object with the keywords this type reads, all optional. */
type SchemaObject = { readonly [keyword: string]: unknown };

export type FromSchema<S> = S extends true
  ? unknown
  : S extends false
    ? never
    : S extends SchemaObject
      ? FromSchemaObject<S>
      : unknown;

type FromSchemaObject<S extends SchemaObject> = S extends { const: infer C }
  ? C
  : S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { anyOf: readonly (infer A)[] }
      ? FromSchema<A>
      : S extends { oneOf: readonly (infer A)[] }
        ? FromSchema<A>
        : S extends { allOf: readonly (infer A)[] }
          ? Simplify<UnionToIntersection<FromSchema<A>>>
          : S extends { type: readonly (infer T)[] }
            ? FromType<T, S>
            : S extends { type: infer T }
              ? FromType<T, S>
              : unknown;

type FromType<T, S extends SchemaObject> = T extends "string"
  ? string
  : T extends "number" | "integer"
    ? number
    : T extends "boolean"
      ? boolean
      : T extends "null"
        ? null
        : T extends "array"
          ? FromArray<S>
          : T extends "object"
            ? FromObject<S>
            : unknown;

type FromArray<S extends SchemaObject> = S extends { prefixItems: readonly [...infer P] }
  ? [...{ [K in keyof P]: FromSchema<P[K]> }, ...(S extends { items: false } ? [] : RestItems<S>)]
  : RestItems<S>;

type RestItems<S extends SchemaObject> = S extends { items: infer I } ? FromSchema<I>[] : unknown[];

type RequiredKeys<S> = S extends { required: readonly (infer R)[] } ? R : never;

type FromObject<S extends SchemaObject> = S extends { properties: infer P extends SchemaObject }
  ? Simplify<
      { -readonly [K in keyof P as K extends RequiredKeys<S> ? K : never]: FromSchema<P[K]> } & {
        -readonly [K in keyof P as K extends RequiredKeys<S> ? never : K]?: FromSchema<P[K]>;
      }
    >
  : S extends { additionalProperties: infer A extends SchemaObject }
    ? Record<string, FromSchema<A>>
    : Record<string, unknown>;
