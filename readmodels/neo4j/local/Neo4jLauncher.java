import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;

/**
 * A Neo4j community server for tests and `eventloom dev neo4j`: Bolt on 127.0.0.1 only, auth on.
 * Arguments: home directory, Bolt port, page cache in MiB. The password comes from the environment
 * (EVENTLOOM_NEO4J_PASSWORD), never from the command line, which any local user can read.
 */
public final class Neo4jLauncher {
    public static void main(String[] args) throws Exception {
        Path home = Path.of(args[0]);
        int port = Integer.parseInt(args[1]);
        long pageCacheMiB = Long.parseLong(args[2]);
        String password = System.getenv("EVENTLOOM_NEO4J_PASSWORD");
        if (password == null || password.length() < 8) {
            System.err.println("EVENTLOOM_NEO4J_PASSWORD must hold a password of at least 8 characters");
            System.exit(2);
        }
        DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
            .setConfig(BoltConnector.enabled, true)
            .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
            .setConfig(HttpConnector.enabled, false)
            .setConfig(GraphDatabaseSettings.auth_enabled, true)
            .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(pageCacheMiB))
            .setConfig(GraphDatabaseSettings.keep_logical_logs, "1 files")
            .build();
        try {
            dbms.database("system").executeTransactionally(
                "ALTER USER neo4j SET PASSWORD $password CHANGE NOT REQUIRED", Map.of("password", password));
        } catch (RuntimeException e) {
            // A restart on its own data with the password it already has: Neo4j refuses to "change" it.
            if (!String.valueOf(e.getMessage()).contains("Old password and new password cannot be the same")) {
                e.printStackTrace();
                dbms.shutdown();  // else the database's threads keep a server running that never said READY
                System.exit(1);
            }
        }
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            dbms.shutdown();
            stopped.countDown();
        }));
        System.out.println("READY bolt://127.0.0.1:" + port);
        System.out.flush();
        stopped.await();
    }
}
