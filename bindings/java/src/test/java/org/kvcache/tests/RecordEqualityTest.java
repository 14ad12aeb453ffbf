package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.kvcache.BlockTable;
import org.kvcache.Cache;
import org.kvcache.CsrTable;
import org.kvcache.ExtraKey;
import org.kvcache.SlotMapping;

/** Records holding arrays compare by value. */
class RecordEqualityTest {
  @Test
  void tablesFromTheSameStateAreEqual() {
    try (Cache cache = Fixtures.cache(32)) {
      cache.addSequence(1, Fixtures.tokens(0, 9));
      cache.addSequence(2, Fixtures.tokens(50, 5));
      long[] ids = {1, 2};
      BlockTable a = cache.blockTable(0, ids, -1);
      BlockTable b = cache.blockTable(0, ids, -1);
      assertNotSame(a.table(), b.table());
      assertEquals(a, b);
      assertEquals(a.hashCode(), b.hashCode());
      assertEquals(a.toString(), b.toString());
      assertTrue(a.toString().contains(", -1"), a.toString());
      assertNotEquals(a, cache.blockTable(0, ids, -2));

      CsrTable c = cache.blockTableCsr(0, ids);
      CsrTable d = cache.blockTableCsr(0, ids);
      assertEquals(c, d);
      assertEquals(c.hashCode(), d.hashCode());
      assertNotEquals(c, cache.blockTableCsr(0, new long[] {2, 1}));

      SlotMapping s = cache.slotMapping(0, ids);
      assertEquals(s, new SlotMapping(s.slots().clone(), s.newTokens().clone()));
      assertEquals(s.hashCode(), new SlotMapping(s.slots().clone(), s.newTokens().clone()).hashCode());
      assertNotEquals(s, cache.slotMapping(0, ids)); // the cursor moved: no new slots
    }
  }

  @Test
  void extraKeysCompareTheirBytes() {
    ExtraKey a = new ExtraKey(0, 4, new byte[] {1, 2, 3});
    ExtraKey b = new ExtraKey(0, 4, new byte[] {1, 2, 3});
    assertEquals(a, b);
    assertEquals(a.hashCode(), b.hashCode());
    assertNotEquals(a, new ExtraKey(0, 4, new byte[] {1, 2, 4}));
    assertNotEquals(a, new ExtraKey(1, 4, new byte[] {1, 2, 3}));
  }
}
