/** Random values for the string formats ajv-formats checks, so generation never leans on a faker's guesses. */
import type { Rng } from '../shared/rng.js';

const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
const word = (rng: Rng, min = 1, max = 8): string => Array.from({ length: rng.int(min, max) }, () => String.fromCharCode(97 + rng.int(0, 25))).join('');

function date(rng: Rng): string {
  const month = rng.int(1, 12);
  const day = rng.int(1, [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] as number);
  return `${rng.int(1990, 2035)}-${pad(month)}-${pad(day)}`;
}

function time(rng: Rng): string {
  return `${pad(rng.int(0, 23))}:${pad(rng.int(0, 59))}:${pad(rng.int(0, 59))}Z`;
}

const hex = (rng: Rng, n: number): string => Array.from({ length: n }, () => rng.int(0, 15).toString(16)).join('');

export const FORMAT_GENERATORS: Readonly<Record<string, (rng: Rng) => string>> = {
  date,
  time,
  'date-time': (rng) => `${date(rng)}T${time(rng)}`,
  email: (rng) => `${word(rng)}@${word(rng)}.com`,
  'idn-email': (rng) => `${word(rng)}@${word(rng)}.com`,
  hostname: (rng) => `${word(rng)}.example.com`,
  'idn-hostname': (rng) => `${word(rng)}.example.com`,
  ipv4: (rng) => Array.from({ length: 4 }, () => rng.int(0, 255)).join('.'),
  ipv6: (rng) => Array.from({ length: 8 }, () => hex(rng, 4)).join(':'),
  uri: (rng) => `https://${word(rng)}.example.com/${word(rng)}`,
  'uri-reference': (rng) => `/${word(rng)}/${word(rng)}`,
  iri: (rng) => `https://${word(rng)}.example.com/${word(rng)}`,
  'iri-reference': (rng) => `/${word(rng)}`,
  url: (rng) => `https://${word(rng)}.example.com/`,
  uuid: (rng) => `${hex(rng, 8)}-${hex(rng, 4)}-4${hex(rng, 3)}-a${hex(rng, 3)}-${hex(rng, 12)}`,
  duration: (rng) => `P${rng.int(0, 9)}DT${rng.int(0, 23)}H`,
  'json-pointer': (rng) => `/${word(rng)}/${rng.int(0, 9)}`,
  'relative-json-pointer': (rng) => `${rng.int(0, 3)}/${word(rng)}`,
  regex: () => '^[a-z]+$',
  'uri-template': (rng) => `https://example.com/{${word(rng)}}`,
  byte: () => 'aGVsbG8=',
  int32: (rng) => String(rng.int(-1000, 1000)),
  int64: (rng) => String(rng.int(-1000, 1000)),
  float: (rng) => String(rng.int(-1000, 1000) / 4),
  double: (rng) => String(rng.int(-1000, 1000) / 4),
  password: (rng) => word(rng, 8, 16),
  binary: (rng) => word(rng),
};

/** Strings that every format above rejects, for mutants that break a format. */
export const FORMAT_BREAKERS: readonly string[] = ['not a valid value', '2024-13-45', '::::', 'a@', '999.999.1.1', ''];
