// Drives kafka-go as Debian packages it (0.2.1, the legacy message format) against a
// broker, as tests/interop/test_go_client.py asks:
//
//	go run kafkago.go <bootstrap> <topic> <group> <replication factor>
//
// It creates the topic, writes 20 records uncompressed and 20 gzip-compressed,
// reads all 40 in a group committing each. Then, as kafka-go's own test "delete
// topics with an invalid topic" does, it creates <topic>-deleted, deletes it with
// an unknown name beside it, and reads its partitions at once (Metadata v1, which
// auto-creates it again). It prints one JSON line with what it saw. Errors exit
// non-zero.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	bootstrap, topic, group := os.Args[1], os.Args[2], os.Args[3]
	replication, err := strconv.Atoi(os.Args[4])
	if err != nil {
		fail("replication factor", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	brokers := strings.Split(bootstrap, ",")
	conn, err := kafka.Dial("tcp", brokers[0])
	if err != nil {
		fail("dial", err)
	}
	err = conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 2, ReplicationFactor: replication})
	if err != nil {
		fail("create topic", err)
	}

	for _, codec := range []string{"none", "gzip"} {
		config := kafka.WriterConfig{Brokers: brokers, Topic: topic, BatchTimeout: 10 * time.Millisecond}
		if codec == "gzip" {
			config.CompressionCodec = gzip.NewCompressionCodec()
		}
		writer := kafka.NewWriter(config)
		var messages []kafka.Message
		for i := 0; i < 20; i++ {
			messages = append(messages, kafka.Message{
				Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", codec, i)),
			})
		}
		if err := writer.WriteMessages(ctx, messages...); err != nil {
			fail("write "+codec, err)
		}
		writer.Close()
	}

	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers: brokers, GroupID: group, Topic: topic, MaxWait: 200 * time.Millisecond,
	})
	var seen []string
	for len(seen) < 40 {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			fail("fetch", err)
		}
		seen = append(seen, string(m.Value))
		if err := reader.CommitMessages(ctx, m); err != nil {
			fail("commit", err)
		}
	}
	reader.Close()
	deleteError, partitions := deleteThenRead(conn, topic+"-deleted", replication)
	conn.Close()
	sort.Strings(seen)
	out, _ := json.Marshal(map[string]interface{}{
		"consumed":         seen,
		"delete_error":     deleteError,
		"partitions_after": partitions,
	})
	fmt.Println(string(out))
}

// deleteThenRead creates `deleted`, deletes it together with a topic that does not
// exist, and reads its partitions right after: the deletion's error (kafka-go's
// test wants UnknownTopicOrPartition, for the unknown topic) and how many
// partitions the read found (it wants none).
func deleteThenRead(conn *kafka.Conn, deleted string, replication int) (string, int) {
	err := conn.CreateTopics(kafka.TopicConfig{Topic: deleted, NumPartitions: 1, ReplicationFactor: replication})
	if err != nil {
		fail("create "+deleted, err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	deleteError := "none"
	if err := conn.DeleteTopics("invalid-topic", deleted); err == kafka.UnknownTopicOrPartition {
		deleteError = "UnknownTopicOrPartition"
	} else if err != nil {
		deleteError = err.Error()
	}
	partitions, err := conn.ReadPartitions(deleted)
	if err != nil {
		fail("read partitions of "+deleted, err)
	}
	conn.SetDeadline(time.Time{})
	return deleteError, len(partitions)
}
