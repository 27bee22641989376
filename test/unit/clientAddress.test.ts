// The address a bound counts a caller by: IPv4 as it is, IPv4-mapped IPv6 as its IPv4, IPv6 by its /64.
import assert from 'node:assert/strict';
import { addressKey } from '../../platform/http/clientAddress';

describe('addressKey', () => {
  it('keeps IPv4, unwraps IPv4-mapped IPv6, and counts IPv6 by its /64 however it is written', () => {
    assert.equal(addressKey('203.0.113.7'), '203.0.113.7');
    assert.equal(addressKey('::ffff:203.0.113.7'), '203.0.113.7');
    assert.equal(addressKey('::FFFF:203.0.113.7'), '203.0.113.7');
    for (const ip of ['2001:db8:5:6::1', '2001:DB8:0005:0006:aaaa::', '2001:db8:5:6:ffff:ffff:ffff:ffff'])
      assert.equal(addressKey(ip), '2001:db8:5:6::/64', ip);
    assert.notEqual(addressKey('2001:db8:5:7::1'), addressKey('2001:db8:5:6::1'), 'another /64');
    assert.equal(addressKey('2001:db8::'), '2001:db8:0:0::/64');
    assert.equal(addressKey('::1'), '0:0:0:0::/64');
  });

  it('leaves what is no address as it is (a bound still counts it)', () => {
    assert.equal(addressKey(''), '');
    assert.equal(addressKey('unknown'), 'unknown');
  });
});
