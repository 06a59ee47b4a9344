/** The list keys every pane shares: ↑/↓ (or k/j) a row, PgUp/PgDn a page, g/G (or Home/End) the ends. */
import { useInput } from 'ink';

export function useListKeys(active: boolean, total: number, cursor: number, page: number, setCursor: (n: number) => void): void {
  useInput(
    (input, key) => {
      const last = Math.max(0, total - 1);
      const to = (n: number): void => setCursor(Math.max(0, Math.min(last, n)));
      if (key.upArrow || input === 'k') to(cursor - 1);
      else if (key.downArrow || input === 'j') to(cursor + 1);
      else if (key.pageUp) to(cursor - Math.max(1, page));
      else if (key.pageDown) to(cursor + Math.max(1, page));
      else if (input === 'g' || key.home) to(0);
      else if (input === 'G' || key.end) to(last);
    },
    { isActive: active },
  );
}
