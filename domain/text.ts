// Cutting text people or callers wrote to a bound, by whole code points. No Node builtins: pure.

/**
 * The text, or its first `max - 1` code points and an ellipsis when it has more than `max` (never half a surrogate
 * pair). Reads no more of a long text than the bound needs.
 */
export function cutCodePoints(text: string, max: number): string {
  // Each code point is one or two UTF-16 units: this many hold more than `max` of them whenever the text does.
  const points = Array.from(text.slice(0, 2 * max + 2));
  return points.length <= max ? text : `${points.slice(0, Math.max(0, max - 1)).join('')}…`;
}
