/**
 * Colour that can be switched off (NO_COLOR, or a terminal without it): every pane says what it
 * means in words too, so colour only ever adds emphasis.
 */
import { Text } from 'ink';
import { createContext, useContext, type ReactNode } from 'react';

export const ColorContext = createContext(true);

export type ToneColor = 'red' | 'green' | 'yellow' | 'cyan' | 'magenta' | 'gray';

export function Tone({ c, bold, children }: { readonly c?: ToneColor | undefined; readonly bold?: boolean; readonly children: ReactNode }) {
  const color = useContext(ColorContext);
  return (
    <Text {...(color && c ? (c === 'gray' ? { dimColor: true } : { color: c }) : {})} {...(bold ? { bold: true } : {})}>
      {children}
    </Text>
  );
}

/** One screen line: cut to the width with an ellipsis, so nothing wraps and pushes the frame off the screen. */
export function fit(text: string, width: number): string {
  if (width <= 0) return '';
  const chars = [...text];
  return chars.length <= width ? text : `${chars.slice(0, Math.max(0, width - 1)).join('')}…`;
}

export function pad(text: string, width: number): string {
  const t = fit(text, width);
  return t + ' '.repeat(Math.max(0, width - [...t].length));
}

/** The window of `total` rows to show so that `cursor` stays visible. */
export function windowOf(total: number, cursor: number, height: number): { readonly start: number; readonly end: number } {
  const h = Math.max(1, height);
  const start = Math.max(0, Math.min(cursor - Math.floor(h / 2), total - h));
  return { start, end: Math.min(total, start + h) };
}
