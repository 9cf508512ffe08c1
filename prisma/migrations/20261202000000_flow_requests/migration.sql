-- AlterTable
ALTER TABLE "AuditRecord" ADD COLUMN     "flowRequestId" UUID,
ALTER COLUMN "executionId" DROP NOT NULL;

-- CreateTable
CREATE TABLE "FlowRequest" (
    "id" UUID NOT NULL,
    "flowName" TEXT NOT NULL,
    "requestId" TEXT NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'pending',
    "channelId" TEXT NOT NULL,
    "methodName" TEXT,
    "message" TEXT,
    "output" TEXT NOT NULL,
    "emit" JSONB NOT NULL,
    "deploymentName" TEXT,
    "flowId" TEXT,
    "assignedEmail" TEXT,
    "assigneeUserId" TEXT,
    "callbackUrl" TEXT NOT NULL,
    "messageTs" TEXT,
    "postClaimedAt" TIMESTAMP(3),
    "fileAttached" BOOLEAN NOT NULL DEFAULT false,
    "decidedBy" TEXT,
    "outcome" TEXT,
    "feedback" TEXT,
    "decidedAt" TIMESTAMP(3),
    "answerStatus" INTEGER,
    "answerMessage" TEXT,
    "remindersSent" INTEGER NOT NULL DEFAULT 0,
    "nextReminderAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "FlowRequest_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "FlowRequest_state_nextReminderAt_idx" ON "FlowRequest"("state", "nextReminderAt");

-- CreateIndex
CREATE INDEX "FlowRequest_messageTs_idx" ON "FlowRequest"("messageTs");

-- CreateIndex
CREATE UNIQUE INDEX "FlowRequest_flowName_requestId_key" ON "FlowRequest"("flowName", "requestId");

-- CreateIndex
CREATE INDEX "AuditRecord_flowRequestId_createdAt_idx" ON "AuditRecord"("flowRequestId", "createdAt");

