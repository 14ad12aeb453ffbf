package org.kvcache.tests;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.kvcache.KvCache;

/** Native loading: the explicit path first, then java.library.path, else a clear error. */
class LoadingTest {
  /** Run in a child JVM: prints the version or the loading error. */
  public static void main(String[] args) {
    try {
      System.out.println("loaded " + KvCache.versionString());
    } catch (UnsatisfiedLinkError e) {
      System.out.println("error " + e.getMessage());
    }
  }

  private static String run(String... properties) throws Exception {
    String java = System.getProperty("java.home") + File.separator + "bin" + File.separator
        + "java";
    String jar = System.getProperty("kvcache.test.jar");
    String tests = new File(LoadingTest.class.getProtectionDomain().getCodeSource().getLocation()
        .toURI()).getPath();
    List<String> cmd = new java.util.ArrayList<>();
    cmd.add(java);
    if (Runtime.version().feature() >= 22) {
      cmd.add("--enable-native-access=ALL-UNNAMED"); // JNI is a restricted method there
    }
    cmd.addAll(List.of(properties));
    cmd.addAll(List.of("-cp", jar + File.pathSeparator + tests, LoadingTest.class.getName()));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertEquals(0, p.waitFor(), out);
    return out.trim();
  }

  @Test
  void explicitPathFileOrFolder() throws Exception {
    String lib = System.getProperty(KvCache.LIBRARY_PATH_PROPERTY);
    assertEquals("loaded " + KvCache.versionString(),
        run("-D" + KvCache.LIBRARY_PATH_PROPERTY + "=" + lib));
    assertEquals("loaded " + KvCache.versionString(),
        run("-D" + KvCache.LIBRARY_PATH_PROPERTY + "=" + new File(lib).getParent()));
    assertEquals("loaded " + KvCache.versionString(),
        run("-Djava.library.path=" + new File(lib).getParent()));
  }

  @Test
  void clearErrorWhenMissing() throws Exception {
    String bad = run("-D" + KvCache.LIBRARY_PATH_PROPERTY + "=/nonexistent/libkvcache_jni.so");
    assertTrue(bad.startsWith("error kvcache: cannot load the JNI library libkvcache_jni.so"), bad);
    assertTrue(bad.contains("/nonexistent/libkvcache_jni.so"), bad);
    assertTrue(bad.contains(KvCache.LIBRARY_PATH_PROPERTY), bad);
    String none = run("-Djava.library.path=/nonexistent");
    assertTrue(none.startsWith("error kvcache: cannot load the JNI library"), none);
    assertTrue(none.contains("java.library.path=/nonexistent"), none);
  }
}
