import assert from 'node:assert/strict';
import {
  cachedZoneCount,
  canonicalTimeZone,
  heldUntil,
  isClockTime,
  isTimeZone,
  quietHoursProblem,
  quietUntil,
  wallTimeToInstant,
  type HoldPrefs,
  type QuietHours,
} from '../../domain/quietHours';

const at = (iso: string): Date => new Date(iso);
const wall = (iso: string): number => Date.parse(`${iso}Z`);
const night = (timeZone: string, extra: Partial<QuietHours> = {}): QuietHours => ({
  start: '22:00',
  end: '07:00',
  timeZone,
  ...extra,
});
const prefs = (extra: Partial<HoldPrefs>): HoldPrefs => ({
  breakThrough: ['human_input_requested'],
  ...extra,
});

describe('quiet hours', () => {
  it('validates zones, times and days', () => {
    assert.ok(isTimeZone('Europe/Berlin'));
    assert.ok(isTimeZone('America/New_York'));
    assert.ok(!isTimeZone('Mars/Olympus'));
    assert.ok(!isTimeZone(''));
    assert.ok(isClockTime('00:00') && isClockTime('23:59') && isClockTime('07:05'));
    assert.ok(!isClockTime('24:00') && !isClockTime('7:00') && !isClockTime('12:60') && !isClockTime('1200'));
    assert.equal(quietHoursProblem(night('Europe/Berlin', { days: ['mon', 'fri'] })), undefined);
    assert.match(quietHoursProblem(night('Nowhere/City'))!, /IANA/);
    assert.match(quietHoursProblem(night('UTC', { start: '25:00' }))!, /start/);
    assert.match(quietHoursProblem(night('UTC', { days: ['funday' as never] }))!, /funday/);
    assert.match(quietHoursProblem(night('UTC', { end: '22:00' }))!, /differ/);
  });

  it('knows a zone by its canonical name, and keeps one formatter per zone however it is spelled', function () {
    // Bounded by its 2,000 spellings, not by the clock: a loaded machine took over the default 10 s.
    this.timeout(120_000);
    assert.equal(canonicalTimeZone('aFrica/abIdjan'), 'Africa/Abidjan');
    assert.equal(canonicalTimeZone('Europe/Berlin'), 'Europe/Berlin');
    assert.equal(canonicalTimeZone('Mars/Olympus'), undefined);
    const before = cachedZoneCount();
    // 2,000 spellings of one zone (Intl accepts any letter case): each used to keep a formatter of its own.
    const letters = 'africa/abidjan'.split('');
    for (let n = 0; n < 2000; n++) {
      const spelling = letters.map((c, i) => ((n >> i) & 1 ? c.toUpperCase() : c)).join('');
      quietUntil(night(spelling), at('2026-12-03T23:30:00Z'));
    }
    assert.ok(cachedZoneCount() - before <= 1, `${cachedZoneCount() - before} formatters for one zone`);
  });

  it('days: at most the seven, each once', () => {
    const week = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
    assert.equal(quietHoursProblem(night('UTC', { days: [...week] })), undefined);
    assert.match(quietHoursProblem(night('UTC', { days: ['mon', 'mon'] }))!, /each day once/);
    assert.match(
      quietHoursProblem(night('UTC', { days: Array.from({ length: 100_000 }, () => 'mon') }))!,
      /each day once/,
    );
  });

  it('a window crossing midnight holds from its start to the next morning', () => {
    const quiet = night('Europe/Berlin'); // CET in December: UTC+1
    assert.equal(quietUntil(quiet, at('2026-12-01T20:59:00Z')), undefined);
    assert.equal(quietUntil(quiet, at('2026-12-01T21:00:00Z'))?.toISOString(), '2026-12-02T06:00:00.000Z');
    assert.equal(quietUntil(quiet, at('2026-12-01T23:30:00Z'))?.toISOString(), '2026-12-02T06:00:00.000Z');
    assert.equal(quietUntil(quiet, at('2026-12-02T05:59:00Z'))?.toISOString(), '2026-12-02T06:00:00.000Z');
    assert.equal(quietUntil(quiet, at('2026-12-02T06:00:00Z')), undefined);
  });

  it('a window within one day, and days naming the day a window starts', () => {
    const lunch: QuietHours = { start: '12:00', end: '13:00', timeZone: 'UTC' };
    assert.equal(quietUntil(lunch, at('2026-12-02T12:30:00Z'))?.toISOString(), '2026-12-02T13:00:00.000Z');
    assert.equal(quietUntil(lunch, at('2026-12-02T13:00:00Z')), undefined);
    // 2026-12-04 is a Friday: its window runs into Saturday morning; Saturday's own window is not listed.
    const fridays = night('UTC', { days: ['fri'] });
    assert.equal(quietUntil(fridays, at('2026-12-05T03:00:00Z'))?.toISOString(), '2026-12-05T07:00:00.000Z');
    assert.equal(quietUntil(fridays, at('2026-12-05T23:00:00Z')), undefined);
    assert.equal(quietUntil(fridays, at('2026-12-03T23:00:00Z')), undefined, 'Thursday night');
  });

  describe('across daylight-saving switches', () => {
    it('Europe/Berlin, spring forward on 2026-03-29: the window is an hour shorter', () => {
      const quiet = night('Europe/Berlin');
      // 22:00 CET on the 28th = 21:00Z; 07:00 CEST on the 29th = 05:00Z.
      const until = quietUntil(quiet, at('2026-03-28T21:00:00Z'));
      assert.equal(until?.toISOString(), '2026-03-29T05:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-03-29T04:59:00Z'))?.toISOString(), '2026-03-29T05:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-03-28T20:59:00Z')), undefined);
    });

    it('Europe/Berlin, fall back on 2026-10-25: the window is an hour longer', () => {
      const quiet = night('Europe/Berlin');
      // 22:00 CEST on the 24th = 20:00Z; 07:00 CET on the 25th = 06:00Z.
      assert.equal(quietUntil(quiet, at('2026-10-24T20:00:00Z'))?.toISOString(), '2026-10-25T06:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-10-25T05:30:00Z'))?.toISOString(), '2026-10-25T06:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-10-24T19:59:00Z')), undefined);
    });

    it('America/New_York, spring forward on 2026-03-08 and fall back on 2026-11-01', () => {
      const quiet = night('America/New_York');
      // 22:00 EST on 03-07 = 03:00Z on 03-08; 07:00 EDT on 03-08 = 11:00Z.
      assert.equal(quietUntil(quiet, at('2026-03-08T03:00:00Z'))?.toISOString(), '2026-03-08T11:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-03-08T02:59:00Z')), undefined);
      // 22:00 EDT on 10-31 = 02:00Z on 11-01; 07:00 EST on 11-01 = 12:00Z.
      assert.equal(quietUntil(quiet, at('2026-11-01T02:00:00Z'))?.toISOString(), '2026-11-01T12:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-11-01T11:59:00Z'))?.toISOString(), '2026-11-01T12:00:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-11-01T01:59:00Z')), undefined);
    });

    it('a wall time that does not exist lands past the gap; one that exists twice is the earlier', () => {
      // Berlin skips 02:00–03:00 on 2026-03-29: 02:30 is read as 03:30 CEST = 01:30Z.
      assert.equal(
        wallTimeToInstant(wall('2026-03-29T02:30:00'), 'Europe/Berlin').toISOString(),
        '2026-03-29T01:30:00.000Z',
      );
      // Berlin has 02:30 twice on 2026-10-25: 02:30 CEST = 00:30Z first.
      assert.equal(
        wallTimeToInstant(wall('2026-10-25T02:30:00'), 'Europe/Berlin').toISOString(),
        '2026-10-25T00:30:00.000Z',
      );
      // New York skips 02:00–03:00 on 2026-03-08 (02:30 EST = 07:30Z) and has 01:30 twice on 2026-11-01.
      assert.equal(
        wallTimeToInstant(wall('2026-03-08T02:30:00'), 'America/New_York').toISOString(),
        '2026-03-08T07:30:00.000Z',
      );
      assert.equal(
        wallTimeToInstant(wall('2026-11-01T01:30:00'), 'America/New_York').toISOString(),
        '2026-11-01T05:30:00.000Z',
      );
    });

    it('a window that ends at a wall time that does not exist ends just past the gap', () => {
      const quiet: QuietHours = { start: '23:00', end: '02:30', timeZone: 'Europe/Berlin' };
      assert.equal(quietUntil(quiet, at('2026-03-28T23:00:00Z'))?.toISOString(), '2026-03-29T01:30:00.000Z');
      assert.equal(quietUntil(quiet, at('2026-03-29T01:30:00Z')), undefined);
    });

    it('a window that starts at a wall time that exists twice starts at its first', () => {
      const quiet: QuietHours = { start: '02:30', end: '04:00', timeZone: 'Europe/Berlin' };
      assert.equal(quietUntil(quiet, at('2026-10-25T00:29:00Z')), undefined);
      assert.equal(quietUntil(quiet, at('2026-10-25T00:30:00Z'))?.toISOString(), '2026-10-25T03:00:00.000Z');
    });
  });

  describe('heldUntil', () => {
    const now = at('2026-12-01T23:00:00Z');

    it('holds during quiet hours, unless the kind breaks through', () => {
      const p = prefs({ quietHours: night('UTC') });
      assert.equal(heldUntil(p, 'run_finished', now)?.toISOString(), '2026-12-02T07:00:00.000Z');
      assert.equal(heldUntil(p, 'human_input_requested', now), undefined);
      assert.equal(
        heldUntil({ ...p, breakThrough: [] }, 'human_input_requested', now)?.toISOString(),
        '2026-12-02T07:00:00.000Z',
      );
      assert.equal(heldUntil(p, 'run_finished', at('2026-12-01T12:00:00Z')), undefined);
    });

    it('do-not-disturb holds like quiet hours; a past one is ignored; breakThrough passes it', () => {
      const until = at('2026-12-02T00:30:00Z');
      assert.equal(
        heldUntil(prefs({ doNotDisturbUntil: until }), 'run_failed', now)?.toISOString(),
        until.toISOString(),
      );
      assert.equal(
        heldUntil(prefs({ doNotDisturbUntil: at('2026-12-01T22:00:00Z') }), 'run_failed', now),
        undefined,
      );
      assert.equal(heldUntil(prefs({ doNotDisturbUntil: until }), 'human_input_requested', now), undefined);
    });

    it('do-not-disturb ending inside quiet hours holds to their end, and the other way round', () => {
      const p = prefs({ quietHours: night('UTC'), doNotDisturbUntil: at('2026-12-02T09:00:00Z') });
      assert.equal(
        heldUntil(p, 'run_failed', at('2026-12-01T18:00:00Z'))?.toISOString(),
        '2026-12-02T09:00:00.000Z',
      );
      const q = prefs({ quietHours: night('UTC'), doNotDisturbUntil: at('2026-12-01T23:30:00Z') });
      assert.equal(
        heldUntil(q, 'run_failed', at('2026-12-01T18:00:00Z'))?.toISOString(),
        '2026-12-02T07:00:00.000Z',
      );
    });
  });
});
