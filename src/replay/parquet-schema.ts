/**
 * Parquet schemas with nested columns (lists, structs), for the exports whose rows are nested by
 * nature (chat messages, verl's prompt and extra_info): the columns arrive in pyarrow, 🤗 datasets
 * and polars as lists and dicts, not JSON text. Written with hyparquet-writer from whole rows.
 */
import type { ParquetWriteOptions } from 'hyparquet-writer';

type SchemaElement = NonNullable<ParquetWriteOptions['schema']>[number];

/** A schema node: one element and its children, depth first, as Parquet's flat schema lists them. */
export type Field = readonly SchemaElement[];

type Leaf = 'STRING' | 'INT32' | 'FLOAT' | 'DOUBLE' | 'BOOLEAN';

/** A nullable scalar (`required` for one that never is null). */
export function scalar(name: string, type: Leaf, required = false): Field {
  const repetition_type = required ? 'REQUIRED' : 'OPTIONAL';
  return [type === 'STRING' ? { name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type } : { name, type, repetition_type }];
}

/** A struct of `fields`. */
export function struct(name: string, fields: readonly Field[], required = false): Field {
  return [{ name, repetition_type: required ? 'REQUIRED' : 'OPTIONAL', num_children: fields.length }, ...fields.flat()];
}

/** A list whose items are `item` (built with the name `element`), in the three-level form every reader knows. */
export function list(name: string, item: (name: string) => Field, required = false): Field {
  return [{ name, repetition_type: required ? 'REQUIRED' : 'OPTIONAL', converted_type: 'LIST', num_children: 1 }, { name: 'list', repetition_type: 'REPEATED', num_children: 1 }, ...item('element')];
}

/** Rows (objects keyed by the top-level fields' names) to a Parquet file. */
export async function writeNestedParquet(file: string, fields: readonly Field[], rows: readonly object[]): Promise<void> {
  const { parquetWriteFile } = await import('hyparquet-writer');
  const schema: SchemaElement[] = [{ name: 'root', num_children: fields.length }, ...fields.flat()];
  parquetWriteFile({
    filename: file,
    schema,
    columnData: fields.map((f) => {
      const name = (f[0] as SchemaElement).name;
      return { name, data: rows.map((r) => (r as Record<string, unknown>)[name] ?? null) };
    }),
  });
}
