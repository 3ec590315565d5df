// legacyclients drives odradek with the Go Kafka clients Debian ships (Sarama 1.22 and
// kafka-go 0.2.1), which send the old request versions Kafka 3.9 still serves. Built by
// tests/interop/test_go_clients.py offline in GOPATH mode against /usr/share/gocode.
//
//	legacyclients sarama  BOOTSTRAP TOPIC GROUP N
//	legacyclients kafkago BOOTSTRAP TOPIC GROUP N
//
// Each prints one line "key=value" per fact the test checks and exits 1 on the first error.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/Shopify/sarama"
	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/gzip"
)

func fail(step string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", step, err)
	os.Exit(1)
}

func value(i int) string { return fmt.Sprintf("value-%06d", i) }

// runSarama: Sarama with its default config (Version 0.8.2: Produce v0, Fetch v0, ListOffsets
// v0, OffsetCommit v1, OffsetFetch v1, Metadata v0, DescribeConfigs v0 from ListTopics);
// only the admin calls need newer settings in Sarama itself: CreateTopic wants Version 0.10.1
// (it still sends CreateTopics v0) and ListTopics 0.11 (it still sends DescribeConfigs v0).
func runSarama(bootstrap, topic, group string, n int) {
	addrs := []string{bootstrap}

	adminConf := sarama.NewConfig()
	adminConf.Version = sarama.V0_10_1_0
	admin, err := sarama.NewClusterAdmin(addrs, adminConf)
	if err != nil {
		fail("admin", err)
	}
	retention := "86400000"
	err = admin.CreateTopic(topic, &sarama.TopicDetail{
		NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention},
	}, false)
	if err != nil {
		fail("CreateTopics v0", err)
	}
	admin.Close()

	conf := sarama.NewConfig() // the default config: Version 0.8.2
	conf.Producer.Return.Successes = true
	fmt.Printf("version=%s\n", conf.Version)
	client, err := sarama.NewClient(addrs, conf)
	if err != nil {
		fail("client", err)
	}
	defer client.Close()

	producer, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		fail("producer", err)
	}
	first, last := int64(-1), int64(-1)
	for i := 0; i < n; i++ {
		_, offset, err := producer.SendMessage(&sarama.ProducerMessage{
			Topic: topic, Key: sarama.StringEncoder(strconv.Itoa(i)), Value: sarama.StringEncoder(value(i)),
		})
		if err != nil {
			fail("Produce v0", err)
		}
		if first < 0 {
			first = offset
		}
		last = offset
	}
	producer.Close()
	fmt.Printf("produced=%d first=%d last=%d\n", n, first, last)

	newest, err := client.GetOffset(topic, 0, sarama.OffsetNewest)
	if err != nil {
		fail("ListOffsets v0", err)
	}
	fmt.Printf("newest=%d\n", newest)

	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		fail("consumer", err)
	}
	pc, err := consumer.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail("Fetch v0", err)
	}
	got := 0
	timeout := time.After(30 * time.Second)
	for got < n {
		select {
		case msg := <-pc.Messages():
			if string(msg.Value) != value(got) || string(msg.Key) != strconv.Itoa(got) || msg.Offset != int64(got) {
				fail("Fetch v0", fmt.Errorf("message %d: offset %d key %q value %q", got, msg.Offset, msg.Key, msg.Value))
			}
			got++
		case err := <-pc.Errors():
			fail("Fetch v0", err)
		case <-timeout:
			fail("Fetch v0", fmt.Errorf("timed out after %d messages", got))
		}
	}
	pc.Close()
	consumer.Close()
	fmt.Printf("consumed=%d\n", got)

	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		fail("offset manager", err)
	}
	pom, err := om.ManagePartition(topic, 0)
	if err != nil {
		fail("OffsetFetch v1", err)
	}
	pom.MarkOffset(int64(got), "sarama")
	if err := pom.Close(); err != nil {
		fail("OffsetCommit v1", err)
	}
	if err := om.Close(); err != nil {
		fail("OffsetCommit v1", err)
	}
	om2, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		fail("offset manager", err)
	}
	pom2, err := om2.ManagePartition(topic, 0)
	if err != nil {
		fail("OffsetFetch v1", err)
	}
	committed, metadata := pom2.NextOffset()
	pom2.Close()
	om2.Close()
	fmt.Printf("committed=%d metadata=%s\n", committed, metadata)

	listConf := sarama.NewConfig()
	listConf.Version = sarama.V0_11_0_0
	listAdmin, err := sarama.NewClusterAdmin(addrs, listConf)
	if err != nil {
		fail("admin", err)
	}
	topics, err := listAdmin.ListTopics()
	if err != nil {
		fail("ListTopics (Metadata v0, DescribeConfigs v0)", err)
	}
	listAdmin.Close()
	detail, ok := topics[topic]
	if !ok {
		fail("ListTopics", fmt.Errorf("topic %s not listed", topic))
	}
	for name, v := range detail.ConfigEntries {
		fmt.Printf("config %s=%s\n", name, *v)
	}
	fmt.Printf("partitions=%d\n", detail.NumPartitions)
}

// runKafkaGo: kafka-go 0.2.1: CreateTopics v0, Produce v2 (Conn and Writer), Fetch v2, and a
// consumer group (FindCoordinator v0, JoinGroup v1, SyncGroup v0, Heartbeat v0, OffsetFetch v1,
// OffsetCommit v2, LeaveGroup v0).
func runKafkaGo(bootstrap, topic, group string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	conn, err := kafka.DialContext(ctx, "tcp", bootstrap)
	if err != nil {
		fail("dial", err)
	}
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		fail("CreateTopics v0", err)
	}
	conn.Close()

	leader, err := kafka.DialLeader(ctx, "tcp", bootstrap, topic, 0)
	if err != nil {
		fail("dial leader", err)
	}
	half := n / 2
	msgs := make([]kafka.Message, 0, half)
	for i := 0; i < half; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: []byte(value(i))})
	}
	if _, err := leader.WriteMessages(msgs...); err != nil {
		fail("Produce v2", err)
	}
	msgs = msgs[:0]
	for i := half; i < n; i++ {
		msgs = append(msgs, kafka.Message{Key: []byte(strconv.Itoa(i)), Value: []byte(value(i))})
	}
	if _, err := leader.WriteCompressedMessages(gzip.NewCompressionCodec(), msgs...); err != nil {
		fail("Produce v2", err)
	}
	fmt.Printf("produced=%d\n", n)

	// plain partition reads: Fetch v2 from offset 0 on. A down-converted response may end
	// with a partial message (its size is declared before conversion, as in Kafka): the
	// next fetch starts where the last whole message ended.
	read, fetches := 0, 0
	for read < n && fetches < 20 {
		fetches++
		if _, err := leader.Seek(int64(read), kafka.SeekAbsolute); err != nil {
			fail("seek", err)
		}
		leader.SetReadDeadline(time.Now().Add(20 * time.Second))
		batch := leader.ReadBatch(1, 10<<20)
		for read < n {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			if string(m.Value) != value(read) || string(m.Key) != strconv.Itoa(read) || m.Offset != int64(read) {
				fail("Fetch v2", fmt.Errorf("message %d: offset %d key %q value %q", read, m.Offset, m.Key, m.Value))
			}
			read++
		}
		batch.Close()
	}
	leader.Close()
	fmt.Printf("fetches=%d\n", fetches)
	fmt.Printf("fetched=%d\n", read)

	// a consumer group reads everything and commits
	reader := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{bootstrap},
		GroupID:           group,
		Topic:             topic,
		MinBytes:          1,
		MaxBytes:          10 << 20,
		MaxWait:           200 * time.Millisecond,
		HeartbeatInterval: 500 * time.Millisecond,
		SessionTimeout:    6 * time.Second,
	})
	got := 0
	for got < n {
		m, err := reader.FetchMessage(ctx)
		if err != nil {
			fail("group fetch", err)
		}
		if string(m.Value) != value(got) {
			fail("group fetch", fmt.Errorf("message %d: offset %d value %q", got, m.Offset, m.Value))
		}
		got++
		if got == n {
			if err := reader.CommitMessages(ctx, m); err != nil {
				fail("OffsetCommit v2", err)
			}
		}
	}
	if err := reader.Close(); err != nil {
		fail("reader close", err)
	}
	fmt.Printf("group_consumed=%d\n", got)
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: legacyclients sarama|kafkago BOOTSTRAP TOPIC GROUP N")
		os.Exit(2)
	}
	n, err := strconv.Atoi(os.Args[5])
	if err != nil {
		fail("N", err)
	}
	switch os.Args[1] {
	case "sarama":
		runSarama(os.Args[2], os.Args[3], os.Args[4], n)
	case "kafkago":
		runKafkaGo(os.Args[2], os.Args[3], os.Args[4], n)
	default:
		fail("client", fmt.Errorf("unknown client %q", os.Args[1]))
	}
}
